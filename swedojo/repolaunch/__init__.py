"""RepoLaunch: repository + commit -> a validated, cached test environment and its `EnvSpec`.

Entry points: `launch.launch` (the whole pipeline, `dojo launch`; backends `local` and `docker`),
`launch.rebuild` (`dojo launch --rebuild`), `launch.environment` (fresh sandboxes on a launched
environment, the repo layer built in each), `detect.analyse` (rules), `testrun.parsers.parse_log` /
`testrun.parsers.check_summary` (test logs, held to the runner's own count). Languages: `recipes`
(one `LanguageRecipe` each: its rules, and what both backends build for it). Layers: `local` (a
cached directory), `images` (docker images with content-addressed tags).
"""
