"""A run's settings: validated once, bad input said in one line; preparing a run claims its directory."""

import json

import pytest
from typer.testing import CliRunner

from swedojo.cli import app
from swedojo.errors import BadInputError
from swedojo.evaluate import evaluate
from swedojo.settings import RunMismatchError, RunSettings


@pytest.mark.parametrize(("values", "said"), [
    ({"rewards": "all"}, "unknown --rewards 'all'; choose tiers or resolved"),
    ({"rewards": "resolved", "perceptual_model": "ckpt"}, "--perceptual-model rates frames for the reward tiers"),
    ({"backend": "vm"}, "unknown sandbox backend 'vm'; choose one of local, docker"),
    ({"executor": "ray", "pool": 2}, "--pool keeps warm sandboxes in this process: it is for --executor local"),
    ({"policy": "empty", "predictions": "preds.json"}, "--predictions grades the file's patches: leave out --policy"),
    ({"workers": "many"}, "workers: Input should be a valid integer"),
    ({"limit": 0, "seed": "x"}, "limit: Input should be greater than or equal to 1; seed: Input should be a valid integer"),
])
def test_bad_settings_are_one_line_naming_what_is_wrong(tmp_path, values, said):
    with pytest.raises(BadInputError) as raised:
        RunSettings.checked(suite="demo", out=tmp_path, **values)
    message = str(raised.value)
    assert message.startswith(said) and "\n" not in message, message


def test_what_needs_the_machine_is_bad_input_when_the_run_is_prepared(tmp_path):
    settings = RunSettings.checked(suite="demo", out=tmp_path / "run", executor="spark")
    with pytest.raises(BadInputError, match="unknown --executor 'spark'; choose local or ray"):
        settings.prepare()
    with pytest.raises(BadInputError, match="policy 'model' needs --model"):
        RunSettings.checked(suite="demo", policy="model", out=tmp_path / "run").prepare()
    with pytest.raises(BadInputError, match="no instance 'nope' in the suite"):
        RunSettings.checked(suite="demo", instance_ids=["nope"], out=tmp_path / "run").prepare()
    assert not (tmp_path / "run" / "run.json").exists()  # nothing is claimed for a run that cannot be


def test_the_policy_is_gold_or_the_predictions_when_none_is_named(tmp_path):
    assert RunSettings.checked(suite="demo", out=tmp_path).policy == "gold"
    assert RunSettings.checked(suite="demo", out=tmp_path, predictions=tmp_path / "p.json").policy == "predictions"


def test_a_prepared_run_records_its_settings_and_refuses_other_ones(tmp_path):
    run = RunSettings.checked(suite="demo", limit=1, rewards="resolved", out=tmp_path).prepare()
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert manifest["suite"] == "demo" and manifest["policy"] == "gold" and manifest["rewards"] == "resolved"
    assert run.settings.mirror is not None and run.settings.mirror.is_dir()  # the bundled suite's own repos
    assert evaluate(run).resolved == 1
    with pytest.raises(RunMismatchError, match=r"other inputs \(policy: 'gold' -> 'empty'\)"):
        RunSettings.checked(suite="demo", limit=1, rewards="resolved", policy="empty", out=tmp_path).prepare()


@pytest.mark.slow
def test_dojo_demo_records_what_made_each_of_its_runs(tmp_path):
    ran = CliRunner().invoke(app, ["demo", "--out", str(tmp_path)])
    assert ran.exit_code == 0, ran.output
    manifests = {name: json.loads((tmp_path / name / "run.json").read_text()) for name in ("gold", "empty", "model")}
    assert {name: m["policy"] for name, m in manifests.items()} == {"gold": "gold", "empty": "empty", "model": "model"}
    assert manifests["model"]["model"] == "tiny:glm_moe_dsa" and all(m["suite"] == "demo" for m in manifests.values())
