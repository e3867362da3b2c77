"""RepoLaunch: repository + commit -> a validated, cached test environment and its `EnvSpec`.

Entry points: `launch.launch` (the whole pipeline, `dojo launch`), `detect.analyse` (rules),
`parsers.parse_log` / `parsers.check_counts` (test logs), `local.open_sandbox` /
`local.prepare_sandbox` (fresh sandboxes on a launched local environment).
"""
