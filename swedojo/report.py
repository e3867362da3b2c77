"""`dojo report`: a run directory as static HTML pages that people look at.

`index.html` holds the counts, the resolved rate per repository, the distributions of the reward and
of each tier's score, and the table of instances (filtered by status by its one small script);
`instances/<id>.html` holds one instance: its tiers and tests, the patch as a diff, the test log and
the trajectory step by step. Pages stand alone: CSS and script inline, charts drawn here as SVG, and
a Content-Security-Policy that lets a page load nothing and run no script but its own, so a report
opened from disk or from a CI artifact makes no request. Everything a model, a patch or a test
printed is escaped (control characters shown as `\\xNN`): it is read, never run.

Read-only over the run directory (`rundir`, `schema`, the summary model of `evaluate`).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from swedojo.evaluate import Summary
from swedojo.rundir import InstanceResult, RunDir, RunManifest, file_name
from swedojo.schema import EvalStatus, Step, TestStatus, Trajectory

TEST_LOG_NAME = "test_output.txt"
"""SWE-bench's name for an instance's test log; one in a directory named after the instance, anywhere
in the run directory, is shown whole on its page (else the end of the log the result keeps)."""
MAX_LOG_CHARS = 1_000_000
"""A longer test log is shown from its end (the start of a long log is rarely where the failure is)."""


class NotARunDirError(Exception):
    """The path is not a `dojo eval` run directory, or its run.json is not a run manifest."""


class NoResultsError(Exception):
    """The run directory holds no result to report (and is not a run of no instances)."""


@dataclass(frozen=True)
class WrittenReport:
    """What `write_report` wrote."""

    index: Path
    """The report's first page."""
    instances: int
    """Instance pages written; 0 for a run of no instances."""


@dataclass(frozen=True)
class _Row:
    """One instance as the index shows it."""

    result: InstanceResult
    repo: str
    page: str
    steps: int | None
    sampled_tokens: int | None


def write_report(run: Path, out: Path | None = None) -> WrittenReport:
    """Write the report of run directory `run` into `out` (default `run/report`): index.html and one
    page per instance in `instances/`."""
    run_dir = RunDir(run)
    manifest, summary = _read_run(run_dir)
    results = sorted(run_dir.read_results().values(), key=lambda r: r.instance_id)
    if not results and not (summary is not None and summary.total == 0):
        raise NoResultsError(_no_results(run_dir))
    out = out or run_dir.root / "report"
    pages = out / "instances"
    pages.mkdir(parents=True, exist_ok=True)
    logs = _test_logs(run_dir)
    rows = []
    for result in results:
        trajectory, problem = _read_trajectory(run_dir, result.instance_id)
        row = _Row(result=result, repo=result.repo or _repo_from_id(result.instance_id), page=_page_name(result.instance_id),
                   steps=len(trajectory.steps) if trajectory else None,
                   sampled_tokens=sum(_sampled(s) for s in trajectory.steps) if trajectory else None)
        _write(pages / row.page, _instance_page(row, trajectory, problem, logs.get(result.instance_id)))
        rows.append(row)
    index = out / "index.html"
    _write(index, _index_page(run_dir, manifest, summary, rows))
    return WrittenReport(index=index, instances=len(rows))


def _test_logs(run_dir: RunDir) -> dict[str, Path]:
    """Instance id -> its kept test log, wherever the run keeps them; not those of a run set aside by
    `dojo eval --restart` (`previous-<time>/`), whose instances have the same ids."""
    return {path.parent.name: path for path in run_dir.root.rglob(TEST_LOG_NAME)
            if not any(part.startswith("previous-") for part in path.relative_to(run_dir.root).parts)}


def _read_run(run_dir: RunDir) -> tuple[RunManifest | None, Summary | None]:
    """The run's manifest and summary; a run written before run.json existed has results only."""
    if not run_dir.root.is_dir():
        raise NotARunDirError(f"{run_dir.root} is not a directory")
    if not run_dir.manifest.is_file() and not run_dir.results.is_file():
        raise NotARunDirError(f"{run_dir.root} is not a run directory of `dojo eval` or `dojo run` (it has no "
                              f"{run_dir.manifest.name} and no {run_dir.results.name})")
    manifest = None
    if run_dir.manifest.is_file():
        try:
            manifest = RunManifest.model_validate_json(run_dir.manifest.read_text(encoding="utf-8"))
        except (ValidationError, UnicodeDecodeError) as exc:
            raise NotARunDirError(f"{run_dir.manifest} is not a run manifest ({_first_line(exc)})") from None
    summary = None
    if run_dir.summary.is_file():
        try:
            summary = Summary.model_validate_json(run_dir.summary.read_text(encoding="utf-8"))
        except (ValidationError, UnicodeDecodeError):
            summary = None  # the results are what the report shows; the summary only adds totals
    return manifest, summary


def _no_results(run_dir: RunDir) -> str:
    if not run_dir.results.is_file():
        return f"{run_dir.root} has no results yet ({run_dir.results.name} is missing: no instance has finished)"
    lines = [line for line in run_dir.results.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    if not lines:
        return f"{run_dir.root} has no results yet ({run_dir.results.name} is empty: no instance has finished)"
    return f"{run_dir.results} has no readable result (none of its {len(lines)} lines is an instance result)"


def _read_trajectory(run_dir: RunDir, instance_id: str) -> tuple[Trajectory | None, str]:
    """The saved trajectory, or None and why there is none to show."""
    path = run_dir.trajectory(instance_id)
    if not path.is_file():
        return None, "no trajectory was saved for this instance"
    try:
        return Trajectory.model_validate_json(path.read_text(encoding="utf-8")), ""
    except (ValidationError, UnicodeDecodeError) as exc:
        return None, f"{path.name} is not a trajectory: {_first_line(exc)}"


def _first_line(exc: Exception) -> str:
    """The first thing wrong, in one line: a validation error's field and message, else the text's first line."""
    if isinstance(exc, ValidationError) and exc.errors():
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{where}: {error['msg']}" if where else error["msg"]
    return next(iter(str(exc).splitlines()), type(exc).__name__)


def _repo_from_id(instance_id: str) -> str:
    """`owner/name` from a SWE-bench id (`owner__name-NUMBER`), for results that do not record their repo."""
    match = re.fullmatch(r"([\w.-]+?)__([\w.-]+)-\d+", instance_id)
    return f"{match[1]}/{match[2]}" if match else ""


def _page_name(instance_id: str) -> str:
    """A file name (and a link needing no quoting) per instance."""
    return f"{file_name(instance_id)}.html"


def _sampled(step: Step) -> int:
    return len(step.response_token_ids) or int(step.usage.get("completion_tokens", 0))


def _write(path: Path, page: str) -> None:
    path.write_text(page, encoding="utf-8", errors="backslashreplace")  # a lone surrogate is shown, not fatal


# --- text -----------------------------------------------------------------------------------------

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0))}


def _t(value: object) -> str:
    """Untrusted text as HTML text: escaped, control characters (but tab and newlines) shown as `\\xNN`."""
    return html.escape(str(value).translate(_CONTROL), quote=True)


def _pre(text: str, cls: str = "") -> str:
    return f'<pre class="{cls}">{_t(text)}</pre>' if cls else f"<pre>{_t(text)}</pre>"


def _status(status: EvalStatus) -> str:
    return f'<span class="badge s-{status.value}">{_t(status.value)}</span>'


def _seconds(value: float) -> str:
    return f"{value:.1f} s"


# --- pages ----------------------------------------------------------------------------------------

_CSS = """
:root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --bg2: #f6f8fa; --ok: #1a7f37; --bad: #cf222e;
        --warn: #9a6700; --info: #0969da; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0 auto;
       max-width: 1200px; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; word-break: break-all; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin: 0 0 4px; }
a { color: var(--info); }
.sub, .muted { color: var(--muted); }
pre { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; background: var(--bg2); border: 1px solid var(--line);
      border-radius: 6px; padding: 8px 10px; margin: 4px 0; white-space: pre-wrap; word-break: break-word;
      max-height: 480px; overflow: auto; }
pre.diff { white-space: pre; max-height: none; }
pre.diff span { display: block; }
.d-add { background: #dafbe1; } .d-del { background: #ffebe9; } .d-hunk { color: var(--info); background: #ddf4ff; }
.d-meta { font-weight: 600; color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 8px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; min-width: 110px; }
.card b { display: block; font-size: 20px; }
.card a { text-decoration: none; color: inherit; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600;
         background: var(--bg2); border: 1px solid var(--line); }
.s-resolved { color: var(--ok); border-color: var(--ok); } .s-unresolved, .s-patch_failed { color: var(--bad); border-color: var(--bad); }
.s-infra_error { color: #fff; background: var(--bad); } .s-empty_patch, .s-needs_network, .s-not_scorable, .s-not_graded { color: var(--warn); border-color: var(--warn); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--bg2); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.err { color: var(--bad); max-width: 360px; word-break: break-word; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; } figcaption { font-weight: 600; } figcaption span { font-weight: normal; color: var(--muted); }
svg text { font: 11px system-ui, sans-serif; fill: var(--fg); }
svg .track { fill: var(--bg2); stroke: var(--line); } svg .fill { fill: var(--ok); } svg .bar { fill: var(--info); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; word-break: break-word; }
.step { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; margin: 10px 0; }
.step .tokens { color: var(--muted); font-size: 12px; margin: 0 0 4px; }
.tool-call { border-left: 3px solid var(--info); padding-left: 8px; margin: 6px 0; }
.tool-name { font: 600 12px ui-monospace, monospace; color: var(--info); }
.observation { border-left: 3px solid var(--muted); padding-left: 8px; margin: 6px 0; }
.label { font-size: 12px; color: var(--muted); }
.step-error { color: var(--bad); }
.empty { font-size: 16px; padding: 12px; border: 1px dashed var(--line); border-radius: 6px; }
.filter { margin: 8px 0; }
"""

_INDEX_SCRIPT = """
const filter = document.getElementById("status-filter");
const known = new Set(Array.from(filter.options, o => o.value));
function show(status) {
  if (!known.has(status)) status = "";
  let shown = 0;
  for (const row of document.querySelectorAll("#instances tbody tr")) {
    row.hidden = status !== "" && row.dataset.status !== status;
    if (!row.hidden) shown++;
  }
  filter.value = status;
  document.getElementById("shown").textContent = shown;
}
function fromHash() {
  const match = location.hash.match(/^#status=([a-z_]+)$/);
  return match ? match[1] : "";
}
filter.addEventListener("change", () => { location.hash = filter.value ? "status=" + filter.value : ""; show(filter.value); });
window.addEventListener("hashchange", () => show(fromHash()));
show(fromHash());
"""


def _page(title: str, body: str, script: str = "") -> str:
    """A whole page: it may load nothing, and run no script but `script` (allowed by its hash)."""
    scripts = f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'" if script else "'none'"
    policy = f"default-src 'none'; style-src 'unsafe-inline'; script-src {scripts}"
    tail = f"<script>{script}</script>" if script else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_t(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n{tail}</body></html>\n")


def _index_page(run_dir: RunDir, manifest: RunManifest | None, summary: Summary | None, rows: list[_Row]) -> str:
    results = [row.result for row in rows]
    policy = manifest.policy if manifest else (results[0].policy if results else "")
    about = [f"suite {manifest.suite}" if manifest else "", f"policy {policy}" if policy else "",
             f"model {manifest.model}" if manifest and manifest.model else "",
             f"rewards {'resolved only' if manifest.rewards == 'resolved' else 'tiers'}" if manifest else ""]
    header = (f"<header><h1>Run {_t(run_dir.root.resolve().name)}</h1>"
              f'<p class="sub">{_t(" · ".join(a for a in about if a))}</p></header>')
    body = [header, _summary_section(summary, results)]
    if rows:
        body += [_repo_section(rows), _tier_section(results), _table_section(rows)]
    return _page(f"dojo report · {run_dir.root.resolve().name}", "\n".join(body), _INDEX_SCRIPT if rows else "")


def _summary_section(summary: Summary | None, results: list[InstanceResult]) -> str:
    if not results:
        return ('<section id="summary"><p class="empty">This run has no instances: its selection of the suite was '
                "empty, so there is nothing to report.</p></section>")
    counts = Counter(r.status for r in results)
    resolved = sum(r.resolved for r in results)
    total = summary.total if summary else len(results)
    cards = [f'<div class="card" id="count-results">results<b>{len(results)}</b>of {total} selected</div>',
             f'<div class="card" id="count-resolved">resolved<b>{resolved}</b>{resolved / len(results):.0%} of the results</div>']
    cards += [f'<div class="card"><a href="#status={s.value}">{_status(s)}<b id="count-{s.value}">{counts[s]}</b></a></div>'
              for s in EvalStatus if counts[s]]
    if any(r.cost_usd is not None or r.prompt_tokens + r.completion_tokens for r in results):
        cards.append(f'<div class="card" id="cost">model cost<b>{_cost(results)}</b>{_tokens(results)}</div>')
    notes = []
    missing = total - len(results)
    if missing > 0:
        notes.append(f"{missing} selected instance{'s' if missing != 1 else ''} without a result "
                     "(the run was stopped or is still going; a resume runs them)")
    if summary and summary.record_errors:
        notes.append(f"{len(summary.record_errors)} suite record(s) could not be read and were left out of the run:"
                     + "".join(f"<br><code>{_t(e)}</code>" for e in summary.record_errors))
    # The notes hold only escaped text and fixed words.
    return ('<section id="summary"><h2>Summary</h2><div class="cards">' + "".join(cards) + "</div>"
            + "".join(f'<p class="muted">{n}</p>' for n in notes) + "</section>")


def _cost(results: list[InstanceResult]) -> str:
    """The model's cost over `results` in dollars; what is at no known price is said, not counted as free."""
    priced = [r.cost_usd for r in results if r.cost_usd is not None]
    unknown = sum(r.cost_usd is None and r.prompt_tokens + r.completion_tokens > 0 for r in results)
    if not priced:
        return "unknown"
    return f"${sum(priced):.4f}" + (f" + {unknown} at no known price" if unknown else "")


def _tokens(results: list[InstanceResult]) -> str:
    return f"{sum(r.prompt_tokens for r in results)} prompt, {sum(r.completion_tokens for r in results)} completion tokens"


def _repo_section(rows: list[_Row]) -> str:
    by_repo: dict[str, list[bool]] = defaultdict(list)
    for row in rows:
        by_repo[row.repo or "(repository not recorded)"].append(row.result.resolved)
    height = 26
    label_w, bar_w = 260, 320
    bars = []
    for i, (repo, outcomes) in enumerate(sorted(by_repo.items())):
        y = i * height
        done, total = sum(outcomes), len(outcomes)
        shown = repo if len(repo) <= 38 else repo[:36] + "…"
        bars.append(
            f'<g class="repo" data-repo="{_t(repo)}"><title>{_t(repo)}: {done} of {total} resolved</title>'
            f'<text x="0" y="{y + 17}">{_t(shown)}</text>'
            f'<rect class="track" x="{label_w}" y="{y + 4}" width="{bar_w}" height="18" rx="3"/>'
            f'<rect class="fill" x="{label_w}" y="{y + 4}" width="{bar_w * done / total:.1f}" height="18" rx="3"/>'
            f'<text x="{label_w + bar_w + 8}" y="{y + 17}">{done}/{total} ({done / total:.0%})</text></g>')
    svg_h = len(by_repo) * height + 4
    return ('<section id="by-repo"><h2>Resolved rate per repository</h2>'
            f'<svg class="chart" role="img" aria-label="resolved rate per repository" width="{label_w + bar_w + 90}" '
            f'height="{svg_h}" viewBox="0 0 {label_w + bar_w + 90} {svg_h}">{"".join(bars)}</svg></section>')


def _tier_section(results: list[InstanceResult]) -> str:
    figures = [_histogram("reward", [r.report.reward for r in results], f"{len(results)} results")]
    tiers: dict[tuple[int, str], list[tuple[float, bool, bool]]] = defaultdict(list)
    for result in results:
        for tier in result.report.tiers:
            tiers[(tier.tier, tier.name)].append((tier.score, tier.passed, tier.scored))
    for (number, name), scores in sorted(tiers.items()):
        scored = [s for s, _, was_scored in scores if was_scored]
        passed = sum(p for _, p, was_scored in scores if was_scored)
        left = len(scores) - len(scored)
        note = ", ".join(part for part in (f"{len(scored)} scored ({passed} passed)" if scored else "",
                                           f"{left} not scored" if left else "") if part)
        figures.append(_histogram(f"tier {number} · {name}", scored, note))
    unscored = "" if tiers else '<p class="muted">No tier was scored (the run graded with --rewards resolved).</p>'
    return ('<section id="tiers"><h2>Reward and tier scores</h2>'
            f'<div class="charts">{"".join(figures)}</div>{unscored}</section>')


def _histogram(title: str, values: list[float], note: str, bins: int = 10) -> str:
    """Counts of `values` in [0, 1] over `bins` equal bins (1.0 in the last)."""
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, max(0, int(value * bins)))] += 1
    width, height, top, bottom = 280, 130, 16, 18
    step = width / bins
    most = max(counts) or 1
    parts = []
    for i, count in enumerate(counts):
        h = (height - top - bottom) * count / most
        y = height - bottom - h
        parts.append(f'<g class="bin"><title>{i / bins:.1f}–{(i + 1) / bins:.1f}: {count}</title>'
                     f'<rect class="bar" x="{i * step + 1:.1f}" y="{y:.1f}" width="{step - 2:.1f}" height="{h:.1f}"/>'
                     + (f'<text x="{i * step + step / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{count}</text>' if count else "")
                     + "</g>")
    axis = (f'<line x1="0" y1="{height - bottom}" x2="{width}" y2="{height - bottom}" stroke="#d0d7de"/>'
            + "".join(f'<text x="{x}" y="{height - 4}" text-anchor="{a}">{label}</text>'
                      for x, a, label in ((0, "start", "0"), (width / 2, "middle", "0.5"), (width, "end", "1"))))
    empty = "" if values else f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">nothing scored</text>'
    return (f'<figure class="histogram" data-tier="{_t(title)}"><figcaption>{_t(title)} <span>{_t(note)}</span></figcaption>'
            f'<svg class="chart" role="img" aria-label="{_t(title)} distribution" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{"".join(parts)}{axis}{empty}</svg></figure>')


def _table_section(rows: list[_Row]) -> str:
    counts = Counter(row.result.status for row in rows)
    options = [f'<option value="">all statuses ({len(rows)})</option>']
    options += [f'<option value="{s.value}">{s.value} ({counts[s]})</option>' for s in EvalStatus if counts[s]]
    body = []
    for row in rows:
        r = row.result
        scored = [t for t in r.report.tiers if t.scored]
        tiers = f"{sum(t.passed for t in scored)}/{len(scored)}" if r.report.tiers else "–"
        body.append(
            f'<tr data-status="{r.status.value}"><td><a href="instances/{row.page}">{_t(r.instance_id)}</a></td>'
            f"<td>{_t(row.repo)}</td><td>{_status(r.status)}</td><td class=\"num\">{r.report.reward:.2f}</td>"
            f'<td class="num">{tiers}</td><td>{_t(r.exit_status.value)}</td>'
            f'<td class="num">{"–" if row.steps is None else row.steps}</td>'
            f'<td class="num">{"–" if row.sampled_tokens is None else row.sampled_tokens}</td>'
            f'<td class="num">{"–" if r.cost_usd is None else f"${r.cost_usd:.4f}"}</td>'
            f'<td class="num">{_seconds(r.duration_s)}</td><td class="err">{_t(r.error)}</td></tr>')
    return ('<section id="table"><h2>Instances</h2>'
            f'<p class="filter"><label>status <select id="status-filter">{"".join(options)}</select></label> '
            f'<span id="shown">{len(rows)}</span> of {len(rows)} shown</p>'
            '<table id="instances"><thead><tr><th>instance</th><th>repository</th><th>status</th><th class="num">reward</th>'
            '<th class="num">tiers passed</th><th>agent stopped</th><th class="num">steps</th><th class="num">tokens sampled</th>'
            f'<th class="num">cost</th><th class="num">time</th><th>error</th></tr></thead><tbody>{"".join(body)}</tbody></table></section>')


def _instance_page(row: _Row, trajectory: Trajectory | None, problem: str, log: Path | None) -> str:
    r = row.result
    report = r.report
    facts = [("status", _status(r.status)), ("resolved", "yes" if r.resolved else "no"), ("reward", f"{report.reward:.2f}"),
             ("repository", _t(row.repo or "not recorded")), ("policy", _t(r.policy)),
             ("model", _t(trajectory.model) if trajectory and trajectory.model else ""),
             ("agent stopped", _t(r.exit_status.value)),
             ("stopped by", _t(trajectory.stopped_by) if trajectory and trajectory.stopped_by else ""),
             ("error", f'<span class="step-error">{_t(r.error)}</span>' if r.error else ""),
             ("time", f"{_seconds(r.duration_s)} ({_seconds(report.test_duration_s)} running tests)"),
             ("test exit code", "" if report.test_exit_code is None else str(report.test_exit_code))]
    body = ['<nav><a href="../index.html">← all instances</a></nav>', f"<h1>{_t(r.instance_id)}</h1>",
            '<dl class="facts" id="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts if v) + "</dl>",
            _tiers_table(r), _tests_section(r), _patch_section(r.patch), _log_section(r, log),
            _trajectory_section(trajectory, problem)]
    return _page(f"{r.instance_id} · dojo report", "\n".join(body))


def _tiers_table(result: InstanceResult) -> str:
    if not result.report.tiers:
        return '<section id="tiers"><h2>Reward tiers</h2><p class="muted">Not scored by tier (graded with --rewards resolved).</p></section>'
    rows = []
    for tier in result.report.tiers:
        verdict = ("passed" if tier.passed else "failed") if tier.scored else "not scored"
        evidence = json.dumps(tier.evidence, indent=1, ensure_ascii=False, default=str)
        rows.append(f'<tr data-tier="{_t(tier.name)}"><td class="num">{tier.tier}</td><td>{_t(tier.name)}</td>'
                    f'<td class="num">{tier.score:.2f}</td><td>{verdict}</td>'
                    f"<td><details><summary>evidence</summary>{_pre(evidence)}</details></td></tr>")
    return ('<section id="tiers"><h2>Reward tiers</h2><table><thead><tr><th class="num">tier</th><th>name</th>'
            f'<th class="num">score</th><th>verdict</th><th>evidence</th></tr></thead><tbody>{"".join(rows)}</tbody></table></section>')


def _tests_section(result: InstanceResult) -> str:
    report = result.report
    parts = []
    for label, statuses in (("FAIL_TO_PASS", report.fail_to_pass), ("PASS_TO_PASS", report.pass_to_pass)):
        if not statuses:
            continue
        passed = sum(1 for s in statuses.values() if s is not None and TestStatus(s).counts_as_pass)
        ordered = sorted(statuses.items(), key=lambda kv: (kv[1] is not None and TestStatus(kv[1]).counts_as_pass, kv[0]))
        lines = "".join(f"<tr><td>{_t(test)}</td><td>{_t(status.value if status else 'missing from the log')}</td></tr>"
                        for test, status in ordered)
        open_ = " open" if passed < len(statuses) else ""
        parts.append(f'<details class="tests" id="tests-{label}"{open_}><summary>{label}: {passed} of {len(statuses)} passed'
                     f"</summary><table><tbody>{lines}</tbody></table></details>")
    extras = (("modules missing from the environment", report.missing_modules), ("left out: need the network", report.needs_network),
              ("left out: fail in this environment at the base commit, passed there in the benchmark's run", report.fails_at_base),
              ("not scorable: the environment cannot run them, with the reference patch either", report.environment_gaps),
              ("left out: not tests", report.not_tests), ("test infrastructure put back", report.restored),
              ("listed names that match no test of the log (counted as failed)", report.unmatched_tests))
    for label, items in extras:
        if items:
            text = "\n".join(f"{k}: {v}" for k, v in items.items()) if isinstance(items, dict) else "\n".join(items)
            parts.append(f'<p class="label">{label}</p>{_pre(text)}')
    if report.standins:
        parts.append(f'<p class="label">stand-ins for test services</p>{_pre(report.standins)}')
    if not parts:
        parts.append('<p class="muted">No test was graded.</p>')
    return '<section id="tests"><h2>Tests</h2>' + "".join(parts) + "</section>"


_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _diff_lines(patch: str) -> list[tuple[str, str]]:
    """(kind, line) per line of a unified diff: meta, hunk, add, del or ctx, read by the hunks' line
    counts, so a removed line that starts with `--` is not taken for a file header."""
    lines = []
    old = new = 0
    for line in patch.splitlines():
        if old > 0 or new > 0:
            if line.startswith("+"):
                kind, new = "add", new - 1
            elif line.startswith("-"):
                kind, old = "del", old - 1
            elif line.startswith("\\"):
                kind = "meta"  # "\ No newline at end of file"
            else:
                kind, old, new = "ctx", old - 1, new - 1
        elif match := _HUNK.match(line):
            kind, old, new = "hunk", int(match[1] or 1), int(match[2] or 1)
        else:
            kind = "meta"
        lines.append((kind, line))
    return lines


def _patch_section(patch: str) -> str:
    if not patch.strip():
        return '<section id="patch"><h2>Patch</h2><p class="muted">No patch was submitted.</p></section>'
    lines = _diff_lines(patch)
    files: dict[str, list[int]] = {}
    current = None
    for kind, line in lines:
        if kind == "meta" and line.startswith("diff --git "):
            current = line.split(" b/", 1)[-1]
            files[current] = [0, 0]
        elif current and kind in ("add", "del"):
            files[current][1 if kind == "del" else 0] += 1
    changed = "".join(f"<li><code>{_t(name)}</code> +{add} −{rm}</li>" for name, (add, rm) in files.items())
    rendered = "".join(f'<span class="d-{kind}">{_t(line) or " "}</span>' for kind, line in lines)
    return f'<section id="patch"><h2>Patch</h2><ul class="files">{changed}</ul><pre class="diff">{rendered}</pre></section>'


def _log_section(result: InstanceResult, log: Path | None) -> str:
    if log is not None:
        text = log.read_text(encoding="utf-8", errors="replace")
        note = f"<code>{_t(log.name)}</code>, whole"
        if len(text) > MAX_LOG_CHARS:
            note = f"the last {MAX_LOG_CHARS:,} of {len(text):,} characters of <code>{_t(log.name)}</code>"
            text = text[-MAX_LOG_CHARS:]
    elif result.report.log_tail:
        text, note = result.report.log_tail, "its end, as the result keeps it (the run directory keeps no whole log)"
    else:
        return '<section id="test-log"><h2>Test log</h2><p class="muted">No test ran.</p></section>'
    return f'<section id="test-log"><h2>Test log</h2><p class="muted">{note}</p>{_pre(text, "log")}</section>'


def _trajectory_section(trajectory: Trajectory | None, problem: str) -> str:
    if trajectory is None:
        return f'<section id="trajectory"><h2>Trajectory</h2><p class="muted">{_t(problem)}</p></section>'
    sampled = sum(_sampled(s) for s in trajectory.steps)
    totals = [f"{len(trajectory.steps)} step{'s' if len(trajectory.steps) != 1 else ''}"]
    if sampled or trajectory.initial_prompt_token_ids:
        totals += [f"{sampled} tokens sampled", f"{len(trajectory.initial_prompt_token_ids)} tokens in the first prompt"]
    if trajectory.cost_usd is not None:
        totals.append(f"cost ${trajectory.cost_usd:.4f}")
    totals.append(f"ended: {trajectory.exit_status.value}")
    head = f'<p class="muted" id="trajectory-totals">{_t("; ".join(totals))}</p>'
    prompts = "".join(f"<details><summary>{label}</summary>{_pre(text)}</details>"
                      for label, text in (("system prompt", trajectory.system_prompt), ("task prompt", trajectory.task_prompt)) if text)
    steps = "".join(_step(step) for step in trajectory.steps) or '<p class="muted">No step was taken.</p>'
    error = f'<p class="step-error">{_t(trajectory.error)}</p>' if trajectory.error else ""
    return f'<section id="trajectory"><h2>Trajectory</h2>{head}{error}{prompts}{steps}</section>'


def _step(step: Step) -> str:
    usage = step.usage
    tokens = [f"{_sampled(step)} tokens sampled"] if step.response_token_ids or usage else []
    if "prompt_tokens" in usage:
        cached = f", {int(usage['cached_tokens'])} cached" if usage.get("cached_tokens") else ""
        tokens.append(f"context {int(usage['prompt_tokens'])} tokens{cached}")
    elif step.prompt_token_ids:
        tokens.append(f"{len(step.prompt_token_ids)} tokens added to the context")
    if "seconds" in usage:
        tokens.append(f"{usage['seconds']:.2f} s")
    if step.logprob_kind is not None:
        tokens.append(f"logprobs: {step.logprob_kind.value}")
    parts = [f'<h3>step {step.index} <span class="badge">{_t(step.phase)}</span></h3>']
    if tokens:
        parts.append(f'<p class="tokens">{_t(" · ".join(tokens))}</p>')
    if step.reasoning:
        parts.append(f'<details class="thinking" open><summary>thinking ({len(step.reasoning)} characters)</summary>'
                     f"{_pre(step.reasoning)}</details>")
    if step.content:
        parts.append(f'<div class="content"><span class="label">said</span>{_pre(step.content)}</div>')
    for call in step.tool_calls:
        args = "".join(f"<dt>{_t(name)}</dt><dd>{_pre(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))}</dd>"
                       for name, value in call.arguments.items())
        parts.append(f'<div class="tool-call"><span class="label">tool call</span> <span class="tool-name">{_t(call.name)}</span>'
                     f'<dl class="facts">{args}</dl></div>')
    if step.observation:
        parts.append(f'<div class="observation"><span class="label">observation</span>{_pre(step.observation)}</div>')
    if step.error:
        parts.append(f'<p class="step-error">{_t(step.error)}</p>')
    return f'<article class="step" id="step-{step.index}">{"".join(parts)}</article>'
