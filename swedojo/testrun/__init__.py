"""Running tests the one way every consumer does: launch validation, `dojo gen`, grading, the reward
tiers, the agent's verify step and the `run_tests` tool.

- `command`: the test command for the whole suite, or for some test files or ids;
- `run`: the command run with its log written to a file in the sandbox and read back whole,
  one `SuiteRun` result, and `passed`, the one definition of a test that counts as passed;
- `parsers`: the test-log parsers and the check of a framework's own counts;
- `patches`: which files a diff touches, applying it with SWE-bench's fallbacks, restoring files.
"""
