"""`dojo report` over real runs of the demo suite, read as HTML and in a real browser (Debian's chromium)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.rundir import InstanceResult, RunDir, RunManifest
from swedojo.schema import EvalStatus, ExitStatus, RewardReport, ToolCall, Trajectory
from swedojo.tools.formats import get_format

CHROMIUM = Path("/usr/bin/chromium")
# Root in a container: no user namespace sandbox for chromium, and a small /dev/shm.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
"""What a model, a patch or a test may print: shown as text on the page, never run."""
FIX_OLD = "    if len(text) <= width:\n        return text\n"
FIX_NEW = FIX_OLD + f"    # {HOSTILE}\n    if width <= len(ellipsis):\n        return ellipsis[:width]\n"
"""textkit-1's fix (with a hostile comment): resolves textkit-1; textkit-2 shares its base, so the
edit applies there and fixes nothing; calckit has no textkit/wrap.py, so the edit fails."""


def _dojo(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs of the demo suite: gold on all of it; a scripted model whose edit resolves one task,
    not another and fails on a third, where its submission of nothing is refused and the run ends at
    its step limit (and whose tool call prints hostile markup); the tiny in-process
    model for two steps (thinking and token counts)."""
    root = tmp_path_factory.mktemp("runs")
    glm = get_format("glm")
    script = root / "script.json"
    script.write_text(json.dumps([
        {"reasoning": "Look first; <b>bold</b> is text.",
         "content": "Plan: read, fix, submit.\n" + glm.render_calls([ToolCall(name="bash", arguments={"command": f"echo '{HOSTILE}'"})])},
        {"content": glm.render_calls([ToolCall(name="str_replace_editor", arguments={
            "command": "str_replace", "path": "textkit/wrap.py", "old_str": FIX_OLD, "new_str": FIX_NEW})])},
        {"content": glm.render_calls([ToolCall(name="submit", arguments={})])},
    ]))
    runs = {name: root / name for name in ("gold", "scripted", "tiny")}
    _dojo("eval", "--suite", "demo", "--policy", "gold", "--workers", "2", "--out", str(runs["gold"]))
    _dojo("eval", "--suite", "demo", "--policy", "model", "--model", f"scripted:{script}", "--max-steps", "3",
          "--out", str(runs["scripted"]),
          *(arg for i in ("textkit-1", "textkit-2", "calckit-1") for arg in ("--instance", f"swedojo-demo__{i}")))
    _dojo("eval", "--suite", "demo", "--policy", "model", "--model", "tiny:glm_moe_dsa", "--max-steps", "2", "--limit", "1",
          "--rewards", "resolved", "--out", str(runs["tiny"]))
    for run in runs.values():
        assert "report of" in _dojo("report", str(run))
    return runs


def _page(run: Path, instance_id: str) -> str:
    return (run / "report" / "instances" / f"{instance_id}.html").read_text(encoding="utf-8")


def test_the_scripted_run_has_the_statuses_the_report_is_tested_on(runs):
    statuses = {r.instance_id: r.status for r in RunDir(runs["scripted"]).read_results().values()}
    assert statuses == {"swedojo-demo__textkit-1": EvalStatus.RESOLVED, "swedojo-demo__textkit-2": EvalStatus.UNRESOLVED,
                        "swedojo-demo__calckit-1": EvalStatus.EMPTY_PATCH}


def test_model_output_patches_and_observations_are_escaped(runs):
    page = _page(runs["scripted"], "swedojo-demo__textkit-1")
    escaped = "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x onerror=&quot;window.__pwned = 2&quot;&gt;"
    assert page.count(escaped) >= 3  # the tool call's argument, its observation, the patch's added line
    assert "<script" not in page and "<img" not in page and "Look first; &lt;b&gt;bold&lt;/b&gt; is text." in page
    assert "&lt;script&gt;" not in (runs["scripted"] / "report" / "index.html").read_text()  # the index shows no model text


def test_control_characters_are_shown_not_sent(runs, tmp_path):
    """A model's or a test's raw control bytes (a terminal escape, a NUL) appear as \\xNN."""
    run = tmp_path / "run"
    report = RewardReport(instance_id="o__r-1", status=EvalStatus.UNRESOLVED, log_tail="\x1b[31mFAILED\x1b[0m x\x00y")
    result = InstanceResult(instance_id="o__r-1", policy="gold", status=EvalStatus.UNRESOLVED, resolved=False,
                            exit_status=ExitStatus.SUBMITTED, report=report)
    run.mkdir()
    RunDir(run).results.write_text(result.model_dump_json() + "\n")
    _dojo("report", str(run))
    page = _page(run, "o__r-1")
    assert "\\x1b[31mFAILED\\x1b[0m x\\x00y" in page and "\x1b" not in page and "\x00" not in page


def test_a_diff_is_read_by_its_hunks(tmp_path):
    """A removed line that begins `--` is a removed line, not a file header."""
    patch = ("diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- old comment\n"
             "+-- new comment\n select 1;\n\\ No newline at end of file\n")
    run = tmp_path / "run"
    run.mkdir()
    result = InstanceResult(instance_id="o__r-1", policy="gold", status=EvalStatus.UNRESOLVED, resolved=False,
                            exit_status=ExitStatus.SUBMITTED, patch=patch,
                            report=RewardReport(instance_id="o__r-1", status=EvalStatus.UNRESOLVED))
    RunDir(run).results.write_text(result.model_dump_json() + "\n")
    _dojo("report", str(run))
    page = _page(run, "o__r-1")
    assert '<span class="d-del">--- old comment</span><span class="d-add">+-- new comment</span>' in page
    assert '<span class="d-meta">--- a/q.sql</span>' in page and "<code>q.sql</code> +1 −1" in page
    assert '<span class="d-meta">\\ No newline at end of file</span>' in page


def test_listed_names_that_match_no_test_are_shown(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    report = RewardReport(instance_id="o__r-1", status=EvalStatus.UNRESOLVED, pass_to_pass={"all tests": None},
                          unmatched_tests=["all tests"])
    result = InstanceResult(instance_id="o__r-1", policy="gold", status=EvalStatus.UNRESOLVED, resolved=False,
                            exit_status=ExitStatus.SUBMITTED, report=report)
    RunDir(run).results.write_text(result.model_dump_json() + "\n")
    _dojo("report", str(run))
    assert "listed names that match no test of the log (counted as failed)</p><pre>all tests</pre>" in _page(run, "o__r-1")


def test_tests_the_environment_cannot_run_are_shown_with_why(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    report = RewardReport(instance_id="o__r-1", status=EvalStatus.NOT_SCORABLE, pass_to_pass={"t.py::d": None},
                          environment_gaps={"t.py::d": "dask: requires dask"}, error="1 listed test cannot run")
    result = InstanceResult(instance_id="o__r-1", policy="gold", status=EvalStatus.NOT_SCORABLE, resolved=False,
                            exit_status=ExitStatus.SUBMITTED, report=report)
    RunDir(run).results.write_text(result.model_dump_json() + "\n")
    _dojo("report", str(run))
    assert "the environment cannot run them, with the reference patch either</p><pre>t.py::d: dask: requires dask</pre>" in _page(run, "o__r-1")
    assert '<span class="badge s-not_scorable">not_scorable</span>' in _page(run, "o__r-1")
    assert ".s-not_scorable" in (run / "report" / "index.html").read_text()


def test_a_kept_test_log_is_shown_whole(runs, tmp_path):
    """A log kept as SWE-bench names it (`<instance>/test_output.txt`) replaces the result's tail."""
    run = tmp_path / "run"
    run.mkdir()
    RunDir(run).results.write_text((runs["gold"] / "results.jsonl").read_text().splitlines()[0] + "\n")
    instance_id = RunDir(run).read_results().popitem()[0]
    log = run / "logs" / instance_id / "test_output.txt"
    log.parent.mkdir(parents=True)
    log.write_text("FIRST LINE OF THE WHOLE LOG\n" + "x\n" * 3000)
    aside = run / "previous-20250101-000000" / "logs" / instance_id / "test_output.txt"  # a run set aside by --restart
    aside.parent.mkdir(parents=True)
    aside.write_text("AN EARLIER RUN'S LOG\n")
    _dojo("report", str(run), "--out", str(tmp_path / "out"))
    page = (tmp_path / "out" / "instances" / f"{instance_id}.html").read_text()
    assert "FIRST LINE OF THE WHOLE LOG" in page and "<code>test_output.txt</code>, whole" in page
    assert "AN EARLIER RUN" not in page


MANIFEST = RunManifest(suite="demo", suite_sha256="0" * 64, policy="gold", rewards="resolved", swedojo_version="0").model_dump_json()


@pytest.mark.parametrize("files, error", [
    (None, "run is not a directory"),
    ({}, "run is not a run directory of `dojo eval` or `dojo run` (it has no run.json and no results.jsonl)"),
    ({"run.json": "{"}, "run.json is not a run manifest (Invalid JSON: EOF while parsing an object"),
    ({"run.json": '{"suite": "demo"}'}, "run.json is not a run manifest (suite_sha256: Field required)"),
    ({"run.json": MANIFEST}, "run has no results yet (results.jsonl is missing: no instance has finished)"),
    ({"run.json": MANIFEST, "results.jsonl": "\n"}, "run has no results yet (results.jsonl is empty"),
    ({"results.jsonl": "{}\nnot json\n"}, "results.jsonl has no readable result (none of its 2 lines is an instance result)"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, files, error):
    run = tmp_path / "run"
    if files is not None:
        run.mkdir()
        for name, text in files.items():
            (run / name).write_text(text)
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and error in result.output and len(result.output.splitlines()) == 1
    assert not (run / "report").exists()


def test_a_run_of_no_instances_says_so(tmp_path):
    _dojo("eval", "--suite", "demo", "--policy", "gold", "--slice", "0:0", "--out", str(tmp_path / "run"))
    output = _dojo("report", str(tmp_path / "run"))
    assert output.startswith("empty run: ") and "selected no instances" in output
    assert "This run has no instances" in (tmp_path / "run" / "report" / "index.html").read_text()


# --- in a real browser ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: `bash scripts/system_deps.sh test` installs Debian's chromium "
                    "(`make test` does)", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A page whose every request and script error is checked after the test: a report asks for
    nothing but its own files, and its script never fails."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == []
    assert requests and all(url.startswith("file://") for url in requests), requests


def _visible_rows(page) -> int:
    return page.locator("#instances tbody tr:visible").count()


def test_the_gold_report_in_a_browser(runs, page, tmp_path):
    page.goto((runs["gold"] / "report" / "index.html").as_uri())
    assert page.locator("#count-results b").inner_text() == "10"
    assert page.locator("#count-resolved b").inner_text() == "10"
    assert sorted(page.locator("#by-repo g.repo").evaluate_all("gs => gs.map(g => g.dataset.repo)")) == [
        "swedojo-demo/calckit", "swedojo-demo/ledger", "swedojo-demo/textkit"]
    assert page.locator("#by-repo g.repo").first.locator("text").all_text_contents() == ["swedojo-demo/calckit", "4/4 (100%)"]
    assert page.locator("#tiers figure figcaption").all_inner_texts()[:4] == [
        "reward 10 results", "tier 0 · format 10 scored (10 passed)", "tier 1 · static 10 scored (10 passed)",
        "tier 2 · tests 10 scored (10 passed)"]
    assert _visible_rows(page) == 10

    page.get_by_role("link", name="swedojo-demo__textkit-1").click()
    assert page.url.endswith("/report/instances/swedojo-demo__textkit-1.html")
    facts = page.locator("#facts")
    assert "resolved" in facts.locator(".badge").inner_text() and "submitted" in facts.inner_text()
    assert "+    if width <= len(ellipsis):" in page.locator("#patch .d-add").all_inner_texts()
    assert page.locator("#patch .d-hunk").first.inner_text().startswith("@@ -11,6 +11,8 @@")
    assert page.locator("#tests-FAIL_TO_PASS summary").inner_text() == "FAIL_TO_PASS: 3 of 3 passed"
    first = page.locator("#step-0")
    assert first.locator(".tool-name").inner_text() == "bash"
    assert "Applied patch textkit/wrap.py cleanly." in first.locator(".observation").inner_text()
    assert "passed" in page.locator("#test-log pre").inner_text()

    page.get_by_role("link", name="← all instances").click()
    assert page.url.endswith("/report/index.html")
    shot = tmp_path / "gold-report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 1000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_status_filter_and_hostile_text_in_a_browser(runs, page, tmp_path):
    page.goto((runs["scripted"] / "report" / "index.html").as_uri())
    assert _visible_rows(page) == 3 and page.locator("#shown").inner_text() == "3"
    textkit = page.locator('#by-repo g.repo[data-repo="swedojo-demo/textkit"]')
    assert textkit.locator("text").all_text_contents() == ["swedojo-demo/textkit", "1/2 (50%)"]
    track, fill = (float(textkit.locator(f"rect.{c}").get_attribute("width")) for c in ("track", "fill"))
    assert fill == track / 2
    for status, instance in (("resolved", "textkit-1"), ("unresolved", "textkit-2"), ("empty_patch", "calckit-1")):
        page.select_option("#status-filter", status)
        assert _visible_rows(page) == 1 and page.locator("#shown").inner_text() == "1"
        assert page.locator("#instances tbody tr:visible a").inner_text() == f"swedojo-demo__{instance}"
    page.select_option("#status-filter", "")
    assert _visible_rows(page) == 3
    page.locator('.card a[href="#status=unresolved"]').click()  # a status's count filters the table too
    from playwright.sync_api import expect

    expect(page.locator("#status-filter")).to_have_value("unresolved")  # on hashchange, which fires after the click
    assert _visible_rows(page) == 1

    page.goto((runs["scripted"] / "report" / "instances" / "swedojo-demo__textkit-1.html").as_uri())
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.scripts.length") == 0 and page.evaluate("document.images.length") == 0
    assert page.locator("#step-0 .tool-name").inner_text() == "bash"
    assert page.locator("#step-0 .tool-call pre").inner_text() == f"echo '{HOSTILE}'"
    assert page.locator("#step-0 .observation pre").inner_text().startswith(HOSTILE)
    assert page.locator("#step-0 .thinking pre").inner_text() == "Look first; <b>bold</b> is text."
    assert f"+    # {HOSTILE}" in page.locator("#patch .d-add").all_inner_texts()
    assert page.locator("#step-1 .tool-name").inner_text() == "str_replace_editor"
    assert page.locator("#step-2 .tool-name").inner_text() == "submit"
    page.screenshot(path=str(tmp_path / "scripted-instance.png"), full_page=True)
    assert (tmp_path / "scripted-instance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_tiny_models_thinking_and_tokens_in_a_browser(runs, page):
    page.goto((runs["tiny"] / "report" / "index.html").as_uri())
    page.locator("#instances tbody a").first.click()
    steps = page.locator("article.step")
    assert steps.count() == 2
    tokens = steps.first.locator(".tokens").inner_text()
    assert "tokens sampled" in tokens and "context" in tokens and "logprobs: raw" in tokens
    assert steps.first.locator(".thinking pre").is_visible()
    totals = page.locator("#trajectory-totals").inner_text()
    assert totals.startswith("2 steps; ") and "tokens in the first prompt" in totals and totals.endswith("ended: limit_steps")
    assert page.locator("#facts").inner_text().count("tiny:glm_moe_dsa") == 1


def test_what_the_model_cost_is_shown_per_instance_and_for_the_run(tmp_path):
    """A priced model's cost is in the index (a card and a column) and on the trajectory's page; an
    instance at no known price is said to be so, not counted as free."""
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    rows = []
    for number, cost in ((1, 0.0125), (2, None)):
        instance = f"o__r-{number}"
        report = RewardReport(instance_id=instance, status=EvalStatus.UNRESOLVED)
        rows.append(InstanceResult(instance_id=instance, policy="model", status=EvalStatus.UNRESOLVED, resolved=False,
                                   exit_status=ExitStatus.SUBMITTED, report=report, cost_usd=cost,
                                   prompt_tokens=1000, completion_tokens=50))
        trajectory = Trajectory(instance_id=instance, policy="model", exit_status=ExitStatus.SUBMITTED, cost_usd=cost)
        (run / "trajectories" / f"{instance}.json").write_text(trajectory.model_dump_json())
    RunDir(run).results.write_text("".join(r.model_dump_json() + "\n" for r in rows))
    _dojo("report", str(run))
    index = (run / "report" / "index.html").read_text()
    assert ('<div class="card" id="cost">model cost<b>$0.0125 + 1 at no known price</b>2000 prompt, 100 completion '
            "tokens</div>") in index
    assert '<td class="num">$0.0125</td>' in index and '<th class="num">cost</th>' in index
    assert "cost $0.0125; ended: submitted" in _page(run, "o__r-1")
