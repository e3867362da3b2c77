"""Build steps limited by their progress, not by a fixed time.

A C++ project's full build takes two minutes on an idle machine and ten on a loaded one; a fixed
limit either cuts real builds or waits long on stuck ones. A step here runs as long as it keeps
printing: it is stopped after `idle_s` without a byte of output, or at `cap_s` in all.
"""

from __future__ import annotations

import secrets
import shlex

from swedojo.sandboxes.base import ExecResult, Sandbox

IDLE_S = 600.0
"""A step that printed nothing for this long is taken as stuck."""
CAP_S = 4 * 3600.0
"""The longest any step may run, printing or not."""
POLL_S = 2
"""How often the watchdog looks at the step's output (the step's end is noticed at once)."""


def run_step(sandbox: Sandbox, command: str, *, idle_s: float = IDLE_S, cap_s: float = CAP_S) -> ExecResult:
    """Run `command` (in the terminal's working directory and variables, in a session of its own so
    that a stop reaches every process it started); its output comes back as `exec` returns it. A
    step stopped for want of progress is `timed_out` with the reason as the output's last line."""
    log = shlex.quote(f"/tmp/swedojo-step-{secrets.token_hex(6)}.log")
    stalled = f"[stopped: no output for {int(idle_s)}s]"
    script = "\n".join([
        f"{{ setsid bash -c {shlex.quote(command)} > {log} 2>&1 < /dev/null & }} 2>/dev/null; __sd_pid=$!",  # no job notice
        # a watchdog beside it stops it when its log stops growing; `wait` returns as soon as it ends
        "{ ( __sd_last=-1; __sd_since=$SECONDS; while kill -0 $__sd_pid 2>/dev/null; do",
        f"  sleep {POLL_S}; __sd_size=$(stat -c %s {log} 2>/dev/null || echo 0)",
        "  if [ \"$__sd_size\" != \"$__sd_last\" ]; then __sd_last=$__sd_size; __sd_since=$SECONDS; fi",
        (f"  if [ $((SECONDS - __sd_since)) -ge {int(idle_s)} ]; then echo {shlex.quote(stalled)} >> {log}; "
         "kill -TERM -- -$__sd_pid 2>/dev/null; sleep 1; kill -KILL -- -$__sd_pid 2>/dev/null; break; fi"),
        "done ) & } 2>/dev/null; __sd_dog=$!; disown $__sd_dog 2>/dev/null",
        "wait $__sd_pid; __sd_rc=$?",
        (f"if [ \"$(tail -n 1 {log})\" = {shlex.quote(stalled)} ]; then while kill -0 $__sd_dog 2>/dev/null; "
         "do sleep 0.1; done; else kill $__sd_dog 2>/dev/null; fi"),
        f"cat {log}; rm -f {log}; (exit $__sd_rc)",
    ])
    result = sandbox.exec(script, timeout=cap_s)
    if result.output.rstrip().endswith(stalled):
        return result.model_copy(update={"exit_code": None, "timed_out": True})
    return result
