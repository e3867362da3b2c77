"""Requirement sources read, not pasted: tox factors, VCS lines, conda files, and skips as evidence.

Each class here broke a launch of a real repository outside the development loop; each is a small
repository made in the test."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from launch_helpers import write_tree

from swedojo.repolaunch.analysis import PythonPlanning
from swedojo.repolaunch.detect import analyse
from swedojo.repolaunch.launch import launch
from swedojo.repolaunch.recipes.pyreqs import (
    Change,
    read_requirement_file,
    requirement,
    tox_env_for,
)
from swedojo.schema import TestStatus

WHEN = datetime(2024, 6, 1, tzinfo=UTC)


def module_project(name: str) -> str:
    """pyproject.toml of a setuptools project of one module, `name.py`."""
    return ("[build-system]\nrequires = ['setuptools>=61']\nbuild-backend = 'setuptools.build_meta'\n"
            f"[project]\nname = '{name}'\nversion = '1'\n[tool.setuptools]\npy-modules = ['{name}']\n")
P = TestStatus.PASSED
TOX = """[tox]
envlist = py{39,310,311,312,313}-{test,alldeps}, docs
[testenv]
deps =
    pytest
    !pypy: -r requirements_test.txt
    py27: mock==1.0
    docs: sphinx
    {py39,py310}-alldeps: legacy-only
extras =
    test
    alldeps: all
commands = pytest {posargs}
"""
TOX_PROJECT = {
    "setup.py": "from setuptools import setup\nsetup(name='p', version='1', py_modules=['p'],\n"
                "      extras_require={'test': ['iniconfig'], 'all': ['nothing-by-this-name-exists-here']})\n",
    "p.py": "def double(x):\n    return 2 * x\n",
    "requirements_test.txt": "six  # the tests import it\n",
    "tox.ini": TOX,
    "test_p.py": "import iniconfig\nimport six\n\nfrom p import double\n\n\ndef test_double():\n    assert double(2) == 4\n\n\n"
                 "def test_deps():\n    assert six.PY3 and iniconfig.IniConfig\n",
}


def test_tox_settings_are_evaluated_for_the_environment_of_the_chosen_interpreter(tmp_path: Path) -> None:
    """`!pypy: -r requirements_test.txt` is a requirement file of every CPython environment, `py27:`
    and `docs:` lines belong to other environments, and a factor-conditional extra is not an extra
    named `alldeps:`."""
    write_tree(tmp_path, TOX_PROJECT)
    analysis = analyse(tmp_path, WHEN, PythonPlanning(runtime="3.11"))
    install = analysis.install_commands[-1]
    assert "-r requirements_test.txt" in install and install.endswith("'.[test]'"), install
    assert not any(word in install for word in ("mock", "sphinx", "legacy-only", "alldeps", "pypy", "all]"))
    assert tox_env_for("py{39,310,311,312,313}-{test,alldeps}, docs", "3.11")[0] == "py311-test"
    older = analyse(tmp_path, WHEN, PythonPlanning(runtime="3.9")).install_commands[-1]
    assert "legacy-only" not in older  # py39-test is the environment, not py39-alldeps


def test_requirement_lines_pip_would_stop_at_are_rewritten_or_dropped_and_said(tmp_path: Path) -> None:
    """A VCS requirement with an inline comment becomes the distribution from the index; a line pip
    cannot parse is dropped; an included file is followed; each change is in the analysis."""
    write_tree(tmp_path, {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\nname = 'p'\nversion = '1'\n",
        "requirements-test.txt": "-r requirements-base.txt\n-r gone.txt\n"
                                 "git+https://github.com/example/attrs-fork.git@v1#egg=attrs # refs: upstream PR\n"
                                 "six>=1.0 \\\n    ; python_version >= '3'\n"
                                 "this is not ( a requirement\n--index-url https://example.invalid/simple\n",
        "requirements-base.txt": "iniconfig\n",
    })
    analysis = analyse(tmp_path, WHEN)
    install = analysis.install_commands[-1]
    assert "attrs" in install and "git+" not in install and "iniconfig" in install, install
    assert "requirements-test.txt" not in install and "not ( a" not in install and "example.invalid" not in install
    assert any("-> `attrs`" in change and "the same distribution from the index" in change
               for change in analysis.requirement_changes), analysis.requirement_changes
    assert any("this is not ( a requirement` dropped (not a valid requirement)" in c for c in analysis.requirement_changes)
    assert any(e.file == "(requirements)" for e in analysis.evidence)  # into the build log
    assert "requirements-test.txt:2: `-r gone.txt` dropped (a file that does not exist here)" in analysis.requirement_changes
    clean = read_requirement_file(tmp_path, "requirements-base.txt")
    assert clean == (["iniconfig"], [], False, [])  # nothing to change: pip reads it as it is
    # a hash-pinned file (pip-compile --generate-hashes) installed with the project itself: pip's hash
    # mode would refuse the project's directory ("Can't verify hashes ... point to directories")
    write_tree(tmp_path, {"requirements/pytest.pip": "attrs==22.1.0 \\\n    --hash=sha256:29ad \\\n"
                                                     "    --hash=sha256:86ef\n    # via pytest\niniconfig==1.1.1 --hash=sha256:0123\n"})
    hashed = read_requirement_file(tmp_path, "requirements/pytest.pip")
    assert hashed.requirements == ["attrs==22.1.0", "iniconfig==1.1.1"]
    assert [c.describe() for c in hashed.changes] == [
        "requirements/pytest.pip: `--hash on 2 line(s)` -> `the same pins without their hashes` (pip checks hashes "
        "for every requirement of an install or none, and cannot for the project itself or the other files "
        "installed with it)"]
    changes: list[Change] = []
    assert requirement("pkg[x] @ git+https://github.com/o/pkg@main ; python_version<'4'", "f", changes) \
        == "pkg[x]; python_version<'4'"


def test_a_conda_environment_file_brings_the_optional_test_dependencies(tmp_path: Path) -> None:
    """Declared only in `ci/requirements/environment.yml` (conda names, a pip section, packages
    that are no distribution): installed by a step that never fails the layer; files for other
    jobs are left out."""
    write_tree(tmp_path, {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\nname = 'p'\nversion = '1'\n",
        "ci/requirements/environment.yml": "name: test\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n"
                                           "  - pip\n  - libnetcdf\n  - msgpack-python>=1.0\n  - conda-forge::six=1.16\n  - pytorch\n"
                                           "  - pip:\n    - iniconfig\n",
        "ci/requirements/doc.yml": "dependencies:\n  - sphinx\n",
        "ci/requirements/bare-minimum.yml": "dependencies:\n  - python=3.9\n",
    })
    analysis = analyse(tmp_path, WHEN)
    optional = analysis.install_commands[-1]
    assert "-c /tmp/swedojo-installed.txt msgpack six iniconfig ||" in optional, optional  # exactly these
    assert "not installed" in optional and not any(word in optional for word in ("libnetcdf", "python", "sphinx"))
    assert "ci/requirements/environment.yml" in analysis.dependency_files
    assert any("`pytorch` dropped (gigabytes from PyPI" in change for change in analysis.requirement_changes)


def test_launch_installs_what_only_a_conda_file_declares_and_tox_factors_name(make_repo, tmp_path: Path,
                                                                              env_cache: Path) -> None:
    """Both launch with every test passing at base: none skipped for want of a module."""
    conda = make_repo("conda", {
        "pyproject.toml": module_project("q"),
        "q.py": "def half(x):\n    return x / 2\n",
        "environment.yml": "dependencies:\n  - python\n  - six\n",
        "tests/test_q.py": "import pytest\n\nfrom q import half\n\nsix = pytest.importorskip('six')\n\n\n"
                           "def test_half():\n    assert half(4) == 2\n\n\ndef test_six():\n    assert six.PY3\n",
    })
    spec = launch(str(conda), tmp_path / "conda", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_q.py::test_half": P, "tests/test_q.py::test_six": P}
    assert spec.skipped_for_modules == {}
    tox = make_repo("tox", TOX_PROJECT)
    spec = launch(str(tox), tmp_path / "tox", cache_dir=env_cache / "envs")
    assert spec.test_status == {"test_p.py::test_double": P, "test_p.py::test_deps": P}


def test_a_module_the_tests_skip_for_is_installed_and_the_suite_validated_again(make_repo, tmp_path: Path,
                                                                                env_cache: Path) -> None:
    """Declared nowhere: the baseline's skips name `dateutil` (its distribution python-dateutil)
    and `not_a_module_anywhere`; the launch installs what the index has and validates again, and
    says what stays missing."""
    repo = make_repo("skips", {
        "pyproject.toml": module_project("r"),
        "r.py": "def one():\n    return 1\n",
        "tests/test_r.py": "import pytest\n\nfrom r import one\n\n\ndef test_one():\n    assert one() == 1\n\n\n"
                           "def test_dates():\n    parser = pytest.importorskip('dateutil.parser')\n"
                           "    assert parser.parse('2024-01-02').day == 2\n",
        "tests/test_other.py": "import pytest\n\npytest.importorskip('not_a_module_anywhere_zq')\n\n\n"
                               "def test_never():\n    pass\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_r.py::test_one": P, "tests/test_r.py::test_dates": P}
    assert list(spec.skipped_for_modules) == ["not_a_module_anywhere_zq"]
    assert any("python-dateutil" in command for command in spec.install_commands)
    log = (tmp_path / "out" / "build.log").read_text()
    assert "tests skipped for want of not_a_module_anywhere_zq, dateutil: installing not-a-module-anywhere-zq, "\
           "python-dateutil and validating again" in log
    assert "optional requirement not-a-module-anywhere-zq not installed" in log


def test_an_editable_install_gets_what_its_build_backend_asks_for(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """hatchling asks for `editables` to build editable (its exact dev mode imports it); without
    build isolation nothing fetched it and the launch failed with `ModuleNotFoundError` hidden in
    the build log."""
    repo = make_repo("hatch", {
        "pyproject.toml": "[build-system]\nrequires = ['hatchling']\nbuild-backend = 'hatchling.build'\n"
                          "[project]\nname = 'h'\nversion = '1'\n"
                          "[tool.hatch.build.targets.wheel]\ndev-mode-exact = true\n",
        "h/__init__.py": "def three():\n    return 3\n",
        "tests/test_h.py": "from h import three\n\n\ndef test_three():\n    assert three() == 3\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_h.py::test_three": P}
    assert "editables" in spec.resolved_dependencies, spec.resolved_dependencies


def test_c_sources_the_repository_leaves_to_cython_are_generated_before_the_build(make_repo, tmp_path: Path,
                                                                                  env_cache: Path) -> None:
    """setup.py compiles `fast/_speed.c`, which the project's own `make cython` writes from the
    committed `.pyx` and git does not hold: Cython is installed, and generates it before the project
    is built (in the deps layer, which builds "." to learn its dependencies, and in each work tree).
    Before, the build failed on "_speed.c: No such file or directory"."""
    repo = make_repo("cythonized", {
        "setup.py": "from setuptools import Extension, setup\n"
                    "setup(name='fast', version='1', packages=['fast'],\n"
                    "      ext_modules=[Extension('fast._speed', sources=['fast/_speed.c'])])\n",
        "fast/__init__.py": "from fast._speed import triple\n",
        "fast/_speed.pyx": "def triple(int x):\n    return 3 * x\n",
        "Makefile": "cython:\n\tcython fast/_speed.pyx\n",
        "tests/test_fast.py": "import fast._speed\n\n\ndef test_compiled():\n"
                              "    assert fast.triple(2) == 6 and fast._speed.__file__.endswith('.so')\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_fast.py::test_compiled": P}
    assert "python -m cython fast/_speed.pyx" in spec.rebuild_commands
    assert "cython" in {name.lower() for name in spec.resolved_dependencies}, spec.resolved_dependencies


PLUGGED = {
    "pyproject.toml": module_project("calc"),
    "calc.py": "def add(a, b):\n    return a + b\n",
    "calc_testing/__init__.py": "",
    "calc_testing/plugin.py": "import pytest\n\n\n@pytest.fixture\ndef numbers():\n    return (2, 3)\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add(numbers):\n    assert add(*numbers) == 5\n",
    ".github/workflows/ci.yml": "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
                                "      - uses: actions/checkout@v4\n      - run: bash -e ci/run.sh\n",
    "ci/run.sh": "#!/bin/bash\nset -ex\npip install -e .\nif pytest -r a -p calc_testing.plugin \\\n"
                 "    -p no:randomly --junitxml=out.xml tests; then echo ok; fi\n",
}


def test_a_plugin_the_projects_own_ci_script_loads_is_loaded(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """The workflow runs `ci/run.sh`, whose pytest loads the repository's own plugin with `-p`
    (its configuration does not): the script is read as the workflow's, and the plugin is loaded
    here too. Without it the suite runs as another (here: a fixture not found)."""
    (root := tmp_path / "tree").mkdir()
    write_tree(root, PLUGGED)
    analysis = analyse(root)
    assert analysis.test_command == "python -m pytest -rA -v -p no:cacheprovider -p calc_testing.plugin"
    assert any("loads the repository's plugin calc_testing.plugin" in e.says for e in analysis.evidence)
    spec = launch(str(make_repo("plugged", PLUGGED)), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_calc.py::test_add": P}


def test_the_console_line_names_the_exception_not_pips_trailer() -> None:
    from swedojo.repolaunch.buildlog import cause

    log = """$ pip install --no-deps --no-build-isolation -e .
  error: subprocess-exited-with-error
  × Preparing editable metadata (pyproject.toml) did not run successfully.
  │ exit code: 1
      AttributeError: module 'hatchling.build' has no attribute 'prepare_metadata_for_build_editable'
      During handling of the above exception, another exception occurred:
      ModuleNotFoundError: No module named 'editables'
  note: This error originates from a subprocess, and is likely not a problem with pip.
error: metadata-generation-failed
"""
    assert cause(log, most=1) == ["ModuleNotFoundError: No module named 'editables'"]


def test_the_failure_signature_says_which_way_the_next_interpreter_lies() -> None:
    """Code older than the interpreter names what the standard library dropped; newer code, what it
    does not have yet. The next plans go that way, nearest first, past the three runtimes a launch
    tries otherwise; a log that says neither leaves the order as it was."""
    from swedojo.repolaunch.analysis import PythonPlanning as Plan
    from swedojo.repolaunch.launch import _toward
    from swedojo.repolaunch.recipes.python import interpreter_direction

    assert interpreter_direction("E   ImportError: cannot import name 'Mapping' from 'collections' (/usr/lib/...)") == -1
    assert interpreter_direction("ModuleNotFoundError: No module named 'distutils'") == -1
    assert interpreter_direction("ImportError: cannot import name 'Union' from 'types' (/usr/lib/python3.11/types.py)") == 1
    assert interpreter_direction("ERROR: Package 'p' requires a different Python: 3.9.2 not in '>=3.10'") == 1
    assert interpreter_direction("AssertionError: assert 1 == 2") == 0
    runtimes = ["3.13", "3.12", "3.11", "3.10", "3.9"]
    older = _toward(-1, "3.12", runtimes, [Plan(runtime="3.11"), Plan(runtime="3.10")], {"3.13"})
    assert [p.runtime for p in older] == ["3.11", "3.10", "3.9"]
    newer = _toward(1, "3.10", runtimes, [Plan(runtime="3.9")], set())
    assert [p.runtime for p in newer] == ["3.11", "3.12", "3.13", "3.9"]


def test_what_the_test_job_installs_by_name_is_optional(tmp_path: Path) -> None:
    """A project whose CI installs its test tools by name (`pip install pytest hypothesis`):
    installed where they can be; the docs job's, options' values and pip itself are not."""
    write_tree(tmp_path, {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\nname = 'p'\nversion = '1'\n",
        ".github/workflows/tests.yml": "jobs:\n  t:\n    steps:\n      - run: |\n"
                                       "          python -m pip install -U pip setuptools && pip install hypothesis "
                                       "'pytest-timeout>=2' -c constraints.txt\n          pytest\n",
        ".github/workflows/docs.yml": "jobs:\n  d:\n    steps:\n      - run: pip install sphinx\n",
    })
    analysis = analyse(tmp_path, WHEN)
    optional = analysis.install_commands[-1]
    assert "-c /tmp/swedojo-installed.txt hypothesis 'pytest-timeout>=2' ||" in optional, optional
    assert not any(word in optional for word in ("sphinx", "constraints.txt", "setuptools"))


def test_what_few_ci_jobs_install_is_left_to_the_skips(tmp_path: Path) -> None:
    """Every job's installs taken together built a layer with tensorflow and pymc for a suite that
    needs neither (its optional-dependencies job's): what fewer than half of the test jobs install
    is left to what the tests' skips ask for; a job that runs no tests (a linter's) does not count."""
    job = "  {name}:\n    steps:\n      - run: pip install {names}\n      - run: {test}\n"
    jobs = [job.format(name=f"tests{i}", names="mpmath", test="bin/test") for i in range(3)]
    jobs.append(job.format(name="optional", names="mpmath numpy tensorflow", test="bin/test_optional.py"))
    jobs.append(job.format(name="numeric", names="mpmath numpy", test="bin/test_numeric.py"))
    jobs.append("  lint:\n    steps:\n      - run: pip install flake8\n      - run: flake8 .\n")
    write_tree(tmp_path, {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\nname = 'p'\nversion = '1'\n",
        ".github/workflows/runtests.yml": "jobs:\n" + "".join(jobs).replace("bin/test", "pytest && bin/test"),
    })
    analysis = analyse(tmp_path, WHEN)
    optional = analysis.install_commands[-1]
    assert "-c /tmp/swedojo-installed.txt mpmath ||" in optional, optional
    assert not any(word in optional for word in ("numpy", "tensorflow", "flake8"))
    assert ".github/workflows/runtests.yml: job optional installs numpy, tensorflow, which fewer than half of the 5 " \
           "test jobs do: left to what the tests' skips ask for" in [f"{e.file}: {e.says}" for e in analysis.evidence]
    # Test jobs that install from requirement files only count too: one extras job of four is not the suite's.
    jobs = [job.format(name=f"tests{i}", names="-r requirements.txt", test="pytest") for i in range(3)]
    jobs.append(job.format(name="extras", names="numpy", test="pytest"))
    write_tree(tmp_path, {"requirements.txt": "iniconfig\n", ".github/workflows/runtests.yml": "jobs:\n" + "".join(jobs)})
    assert "numpy" not in " ".join(analyse(tmp_path, WHEN).install_commands)


def test_a_module_the_conftest_cannot_import_is_installed_and_the_launch_tried_again(make_repo, tmp_path: Path,
                                                                                      env_cache: Path) -> None:
    """The conftest imports what no file of the project declares (a dependency group the rules did
    not pick): no test is collected at all, and the import error names what to install."""
    repo = make_repo("conftest-import", {
        "pyproject.toml": module_project("c"),
        "c.py": "def two():\n    return 2\n",
        "tests/conftest.py": "import six  # noqa: F401\n",
        "tests/test_c.py": "from c import two\n\n\ndef test_two():\n    assert two() == 2\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_c.py::test_two": P}
    assert len(spec.attempts) == 1 and "[test-discovery]" in spec.attempts[0], spec.attempts
    assert "modules the repository does not provide are missing: trying again with six installed" in \
        (tmp_path / "out" / "build.log").read_text()


def test_a_requirement_in_conflict_with_the_project_itself_is_installed_after_the_rest(tmp_path: Path) -> None:
    """A tox environment that also lints pins the linter, which pins an older release of the project
    (pyflakes' `flake8==6.1.0`): pip refuses the whole install. The retry installs it where it can
    be, after the project's own requirements; a conflict between two dependencies changes nothing."""
    from swedojo.repolaunch.recipes.python import PythonRecipe

    said = ("ERROR: Cannot install flake8==6.1.0 and pyflakes 3.4.0 (from /opt/swedojo/src) because these package "
            "versions have conflicting dependencies.\nERROR: ResolutionImpossible: for help visit ...")
    write_tree(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='pyflakes')\n",
                          "tox.ini": "[testenv]\ndeps =\n    flake8==6.1.0\n    pytest\n"})
    plan = PythonPlanning(runtime="3.11")
    analysis = analyse(tmp_path, WHEN, plan)
    retry = PythonRecipe().retry(plan, analysis, said)
    assert retry is not None and retry.demoted == ("flake8",)
    again = analyse(tmp_path, WHEN, retry).install_commands
    assert "flake8" not in again[-2] and "-c /tmp/swedojo-installed.txt flake8==6.1.0 ||" in again[-1], again
    between = said.replace("pyflakes 3.4.0 (from /opt/swedojo/src)", "pyflakes==3.4.0")
    assert PythonRecipe().retry(plan, analysis, between) is None


def test_a_suite_whose_settings_force_colour_is_read(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """`addopts = ["--color=yes"]` in the project's pytest settings: every line of the log carries
    escape sequences, which the launch took for a run with no results at all."""
    repo = make_repo("colour", {
        "pyproject.toml": module_project("k") + "[tool.pytest.ini_options]\naddopts = ['--color=yes']\n",
        "k.py": "def four():\n    return 4\n",
        "test_k.py": "from k import four\n\n\ndef test_four():\n    assert four() == 4\n\n\ndef test_not_five():\n"
                     "    assert four() != 5\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"test_k.py::test_four": P, "test_k.py::test_not_five": P}


def test_a_nox_session_installing_a_dependency_group_asks_for_the_group_not_a_package(tmp_path: Path) -> None:
    """`session.install("--group", "test")` named a package `test`, which no index has."""
    write_tree(tmp_path, {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\nname = 'p'\nversion = '1'\n"
                          "[dependency-groups]\ntests = ['iniconfig']\n",
        "noxfile.py": "import nox\n\n@nox.session\ndef tests(session):\n"
                      "    session.install('--group', 'tests', '-c', 'constraints.txt', 'hypothesis')\n",
    })
    install = analyse(tmp_path, WHEN).install_commands[-1]
    assert "--group tests" in install and "hypothesis" in install, install
    assert "constraints.txt" not in install and " tests " not in install.replace("--group tests", "")


NOXFILE_WITH_HELPERS = """import nox

PYPROJECT = nox.project.load_toml("pyproject.toml")
BINARY_ONLY = ("--only-binary", "hypothesis")


@nox.session
def tests(session):
    session.install(*BINARY_ONLY, *nox.project.dependency_groups(PYPROJECT, "test"))
    session.install("-e.", "--group=extra")


@nox.session
def lint(s):
    s.install("no-such-linter")


@nox.session
def docs(session):
    session.install("-r", "docs/requirements.txt")
"""


def test_a_noxfile_is_read_from_its_syntax_not_its_text(tmp_path: Path) -> None:
    """Seen on a real noxfile: `session.install(*BINARY_ONLY, *nox.project.dependency_groups(PYPROJECT,
    "test"))` was cut at the inner call's `)` and its group's name installed as a package `test`."""
    write_tree(tmp_path, {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n[project]\nname = 'p'\nversion = '1'\n"
                          "[dependency-groups]\ntest = ['iniconfig']\nextra = ['pluggy']\n",
        "noxfile.py": NOXFILE_WITH_HELPERS,
        "docs/requirements.txt": "no-such-theme\n",
    })
    analysis = analyse(tmp_path, WHEN)
    install = analysis.install_commands[-1]
    assert "--group test" in install and "--group extra" in install, install
    words = install.replace("--group test", "").replace("--group extra", "").split()
    assert not {"test", "extra", "hypothesis", "no-such-linter", "no-such-theme"} & set(words), install
    assert any("left out: sessions docs, lint" in e.says for e in analysis.evidence), analysis.evidence


def test_a_requirement_that_brings_an_older_pip_does_not_take_over_the_install(make_repo, tmp_path: Path,
                                                                               env_cache: Path) -> None:
    """A test requirement pulls pip 23 into the venv: the steps after it (the layer's own pip, dated)
    ran that pip, which has no `--uploaded-prior-to`, and every plan failed the same way."""
    repo = make_repo("old-pip", {
        "pyproject.toml": module_project("o"),
        "requirements-test.txt": "pip==23.2.1\n",
        "o.py": "def five():\n    return 5\n",
        "test_o.py": "from o import five\n\n\ndef test_five():\n    assert five() == 5\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"test_o.py::test_five": P}
    assert spec.attempts == [], spec.attempts


NO_EDITABLE_BACKEND = '''"""A build backend without PEP 660's editable hook, as old flit and setuptools were."""
import base64, hashlib, os, zipfile


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist = "nohook-1.dist-info"
    files = {"nohook.py": open("src/nohook.py", "rb").read(),
             dist + "/METADATA": b"Metadata-Version: 2.1\\nName: nohook\\nVersion: 1\\n",
             dist + "/WHEEL": b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    digest = lambda data: base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record = [f"{path},sha256={digest(data)},{len(data)}" for path, data in files.items()] + [dist + "/RECORD,,"]
    name = "nohook-1-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
        wheel.writestr(dist + "/RECORD", "\\n".join(record) + "\\n")
    return name
'''


def test_a_project_its_backend_cannot_install_editable_is_installed_and_reinstalled_before_each_run(
        make_repo, tmp_path: Path, env_cache: Path) -> None:
    """pip refuses `-e .` for a backend without `build_editable` and no setup.py: the launch failed
    in the repo layer. The plain install it falls back to is repeated before every test run, so an
    edit to the tree (a candidate's patch) is what the tests see."""
    from swedojo.sandboxes.environment import Environment
    from swedojo.testrun.run import run_suite

    repo = make_repo("nohook", {
        "pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = 'nohook_backend'\nbackend-path = ['_backend']\n"
                          "[project]\nname = 'nohook'\nversion = '1'\n",
        "_backend/nohook_backend.py": NO_EDITABLE_BACKEND,
        "src/nohook.py": "def seven():\n    return 7\n",
        "tests/test_nohook.py": "from nohook import seven\n\n\ndef test_seven():\n    assert seven() == 7\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"tests/test_nohook.py::test_seven": P}
    assert "swedojo: the editable install failed" in (tmp_path / "out" / "build.log").read_text()
    with Environment(spec=spec, source=repo).open() as sandbox:
        sandbox.write_file("src/nohook.py", b"def seven():\n    return 8\n")
        run = run_suite(sandbox, spec)
    assert run.statuses == {"tests/test_nohook.py::test_seven": TestStatus.FAILED}, run.log[-2000:]


def test_a_unittest_suite_skipping_for_a_module_gets_it_installed(make_repo, tmp_path: Path, env_cache: Path) -> None:
    """A suite run by unittest says what it lacks in its own words (`skipped 'requires six'`, a test
    module it could not import): read as pytest's skips are, the module is installed and the suite
    validated again."""
    repo = make_repo("unittest-skips", {
        "pyproject.toml": module_project("u"),
        "tox.ini": "[tox]\nenvlist = py\n[testenv]\ncommands = python -m unittest discover -v -s tests -t .\n",
        "u.py": "def two():\n    return 2\n",
        "tests/__init__.py": "",
        "tests/test_u.py": "import unittest\n\ntry:\n    import six\nexcept ImportError:\n    six = None\n\nfrom u import two\n\n\n"
                           "class U(unittest.TestCase):\n    def test_two(self):\n        self.assertEqual(two(), 2)\n\n"
                           "    @unittest.skipIf(six is None, 'requires six')\n    def test_six(self):\n"
                           "        self.assertTrue(six.PY3)\n",
        "tests/test_toml.py": "import unittest\n\nimport toml\n\n\nclass T(unittest.TestCase):\n"
                              "    def test_load(self):\n        self.assertEqual(toml.loads('a = 2')['a'], 2)\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.log_parser == "unittest"
    assert spec.test_status == {"test_two (tests.test_u.U)": P, "test_six (tests.test_u.U)": P,
                                "test_load (tests.test_toml.T)": P}, spec.test_status
    assert spec.skipped_for_modules == {}
    log = (tmp_path / "out" / "build.log").read_text()
    assert "tests skipped for want of six, toml: installing six, toml and validating again" in log, log[-3000:]


def test_a_project_whose_addopts_use_the_cache_plugin_keeps_it_out_of_the_work_tree(make_repo, tmp_path: Path,
                                                                                    env_cache: Path) -> None:
    """`addopts = --failed-first` is the cache plugin's option: under `-p no:cacheprovider` pytest
    stopped at "unrecognized arguments" and every plan failed at test discovery."""
    repo = make_repo("failed-first", {
        "pyproject.toml": module_project("f") + "[tool.pytest.ini_options]\naddopts = '--failed-first -ra'\n",
        "f.py": "def four():\n    return 4\n",
        "test_f.py": "from f import four\n\n\ndef test_four():\n    assert four() == 4\n",
    })
    spec = launch(str(repo), tmp_path / "out", cache_dir=env_cache / "envs")
    assert spec.test_status == {"test_f.py::test_four": P}
    assert "no:cacheprovider" not in spec.test_command and "--cache-clear" in spec.test_command, spec.test_command
    assert "addopts use the cache plugin's --failed-first" in (tmp_path / "out" / "build.log").read_text()


def test_an_import_name_is_mapped_to_the_distribution_that_provides_it() -> None:
    """A suite's own pytest plugin imported `xdist`; the retry installed a distribution `xdist`
    (another project's), not pytest-xdist, and every plan failed at discovery."""
    from swedojo.repolaunch.recipes.pyreqs import distribution_of

    assert [distribution_of(m) for m in ("xdist", "yaml", "pytest_mock", "torch")] == \
        ["pytest-xdist", "PyYAML", "pytest-mock", ""]
