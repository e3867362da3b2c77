"""How a command starts as a background job of a non-interactive shell (`cmd &`): SIGINT ignored.

CI's own runner may start the tests so; Python then installs no KeyboardInterrupt handler of its
own, and whatever must still hear Ctrl-C (or `ray.cancel`) has to install one."""

AS_A_BACKGROUND_JOB = ["sh", "-c", "trap '' INT; exec \"$@\"", "sh"]
"""Prefix of a command line that runs it with SIGINT ignored (exec keeps it ignored)."""
