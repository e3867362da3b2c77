"""The bundled `web-demo` suite: front-end tasks over real git repos, each with a gold patch and checks."""

from __future__ import annotations

import subprocess

from swedojo.datasets.demo import (
    WEB_DEMO,
    demo_projects,
    load_demo_tasks,
    materialise_demo,
)
from swedojo.datasets.registry import load_suite

TASKS = load_demo_tasks(WEB_DEMO)


def test_six_front_end_tasks_with_checks_for_every_tier():
    assert len(TASKS) >= 6
    assert {t.repo.split("/")[1] for t in TASKS} == set(demo_projects(WEB_DEMO))
    for task in TASKS:
        assert task.checks is not None and task.checks.pages, task.instance_id
        assert task.patch.strip() and not task.FAIL_TO_PASS and not task.test_patch
    deck = next(t for t in TASKS if t.instance_id == "swedojo-web__deck-1")
    assert deck.checks.runtime.frames == "section.slide" and abs(deck.checks.runtime.aspect_ratio - 16 / 9) < 1e-9
    assert any(s.steps and s.steps[0].do == "drag" for t in TASKS for s in t.checks.runtime.scenarios)


def test_each_gold_patch_applies_at_its_base_commit(tmp_path):
    mirror = materialise_demo(tmp_path, WEB_DEMO)
    for task in TASKS:
        repo = mirror / task.repo
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        assert head == task.base_commit, task.instance_id
        checked = subprocess.run(["git", "apply", "--check", "-"], cwd=repo, input=task.patch, capture_output=True, text=True, check=False)
        assert checked.returncode == 0, (task.instance_id, checked.stderr)


def test_registered_as_web_demo():
    suite = load_suite("web-demo")
    assert [t.instance_id for t in suite.loaded.instances] == [t.instance_id for t in TASKS]
    assert suite.mirror is not None and (suite.mirror / WEB_DEMO.org).is_dir()
