"""The perceptual scorer of tier visual on tiny random ViT classifiers built here (nothing is
downloaded): its label rule, its check group on real screenshots, and refusing a bad checkpoint."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw
from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

from swedojo.rewards.web.perceptual import PerceptualModelError, load_scorer
from swedojo.rewards.web.render import Shot
from swedojo.rewards.web.visual import visual_check
from swedojo.schema import Viewport, VisualChecks


def tiny_classifier(where: Path, labels: dict[int, str], bias: list[float] | None = None) -> Path:
    """A random ViT image classifier saved with its processor; with `bias`, its head is made to
    output exactly those logits whatever the image (zero weights), so a score can be worked out."""
    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=32, num_labels=len(labels), id2label=labels,
                       label2id={name: index for index, name in labels.items()})
    model = ViTForImageClassification(config)
    if bias is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(where)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(where)
    return where


def page_png(where: Path, width: int = 320, height: int = 240) -> Path:
    """A page-like screenshot: lines of dark text centred on white."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for row in range(6):
        draw.text((60, 50 + 25 * row), "Small changes are easy to review", fill=(20, 20, 40))
    image.save(where)
    return where


def _shot(png: Path) -> Shot:
    width, height = Image.open(png).size
    return Shot(page="index.html", viewport=Viewport(width=width, height=height), png=png,
                frames=[{"x": 0, "y": 0, "w": width, "h": height, "where": "page"}], texts=[], framed=False)


def test_scores_are_in_unit_interval_and_deterministic(tmp_path):
    scorer = load_scorer(tiny_classifier(tmp_path / "model", {0: "bad", 1: "good"}))
    image = np.asarray(Image.open(page_png(tmp_path / "page.png")).convert("RGB"))
    noise = np.random.default_rng(0).integers(0, 256, image.shape, dtype=np.uint8)
    scores = [scorer.score(image), scorer.score(noise)]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores[0] != scores[1]  # the image matters
    assert scorer.score(image) == scores[0]
    assert load_scorer(tmp_path / "model") is scorer  # loaded once per path
    assert not scorer.model.training


@pytest.mark.parametrize(("labels", "bias", "expected"), [
    ({0: "bad", 1: "good"}, [2.0, -1.0], 1 / (1 + math.exp(3.0))),  # label `good`, the last one
    ({0: "good", 1: "bad"}, [2.0, -1.0], 1 / (1 + math.exp(-3.0))),  # label `good`, not the last one
    ({0: "cat", 1: "dog", 2: "fish"}, [0.0, 0.0, 1.0], math.e / (2 + math.e)),  # no `good`: the last label
    ({0: "quality"}, [1.5], 1 / (1 + math.exp(-1.5))),  # one output: sigmoid of its logit
], ids=["good-last", "good-first", "no-good", "one-output"])
def test_label_rule(tmp_path, labels, bias, expected):
    scorer = load_scorer(tiny_classifier(tmp_path / "model", labels, bias))
    image = np.asarray(Image.open(page_png(tmp_path / "page.png")).convert("RGB"))
    assert scorer.score(image) == pytest.approx(expected, abs=1e-6)


def test_visual_check_rates_each_frame_against_min_perceptual(tmp_path):
    scorer = load_scorer(tiny_classifier(tmp_path / "model", {0: "bad", 1: "good"}))
    shots = [_shot(page_png(tmp_path / "page.png"))]
    lenient = visual_check(shots, VisualChecks(min_perceptual=0.0), scorer)
    assert lenient.passed and lenient.score == 1.0, lenient.evidence
    assert "perceptual" in lenient.evidence["checked"]
    rating = lenient.evidence["measures"]["index.html@320x240"]["frames"][0]["perceptual"]
    assert 0.0 < rating < 1.0
    strict = visual_check(shots, VisualChecks(min_perceptual=1.0), scorer)
    assert not strict.passed and list(strict.evidence["violations"]) == ["perceptual"]
    assert strict.score == pytest.approx(4 / 5)
    unrated = visual_check(shots, VisualChecks(min_perceptual=1.0))
    assert unrated.passed and "perceptual" not in unrated.evidence["checked"]  # not rated is not a pass either
    assert "perceptual" not in unrated.evidence["measures"]["index.html@320x240"]["frames"][0]


def test_missing_or_invalid_checkpoint_is_refused(tmp_path):
    with pytest.raises(PerceptualModelError, match="no such directory"):
        load_scorer(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PerceptualModelError, match="not an image-classification checkpoint"):
        load_scorer(tmp_path / "empty")


@pytest.mark.parametrize("weights", ["pytorch_model.bin", "model.safetensors"])
def test_a_checkpoint_whose_weights_cannot_be_read_is_refused_with_the_documented_error(tmp_path, weights):
    where = tiny_classifier(tmp_path / "broken", {0: "bad", 1: "good"})
    for old in ("model.safetensors", "pytorch_model.bin"):
        (where / old).unlink(missing_ok=True)
    (where / weights).write_bytes(b"\x80\x04not a pickle nor a safetensors header")
    with pytest.raises(PerceptualModelError, match="not an image-classification checkpoint"):
        load_scorer(where)


def test_dojo_eval_refuses_a_bad_checkpoint_before_running(tmp_path):
    from typer.testing import CliRunner

    from swedojo.cli import app

    result = CliRunner().invoke(app, ["eval", "--suite", "web-demo", "--policy", "gold", "--backend", "local",
                                      "--perceptual-model", str(tmp_path / "absent"), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "no such directory" in result.output
    assert not (tmp_path / "run").exists()
    model = tiny_classifier(tmp_path / "model", {0: "bad", 1: "good"})
    result = CliRunner().invoke(app, ["eval", "--suite", "web-demo", "--rewards", "resolved", "--backend", "local",
                                      "--perceptual-model", str(model), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "needs --rewards tiers" in result.output, result.output


@pytest.mark.slow
@pytest.mark.parametrize(("bias", "resolved"), [([-1.0, 2.0], True), ([2.0, -1.0], False)], ids=["rated-good", "rated-bad"])
def test_reward_config_brings_the_scorer_to_tier_visual_of_web_demo(tmp_path, bias, resolved):
    """The deck's gold in chromium, scored with `RewardConfig.perceptual_model`: every slide is
    rated, and a checkpoint that rates every frame bad fails tier visual, hence the task."""
    from swedojo.datasets.registry import load_suite
    from swedojo.rewards.compose import RewardConfig
    from swedojo.rewards.score import score
    from swedojo.rollout import EnvironmentResolver
    from swedojo.sandboxes.browser import CHROMIUM
    from swedojo.schema import ExitStatus, Trajectory

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: `bash scripts/system_deps.sh test` installs Debian's chromium", pytrace=False)
    suite = load_suite("web-demo")
    deck = next(t for t in suite.loaded.instances if t.instance_id == "swedojo-web__deck-1")
    model = tiny_classifier(tmp_path / "model", {0: "bad", 1: "good"}, bias)
    trajectory = Trajectory(instance_id=deck.instance_id, policy="test", patch=deck.patch, exit_status=ExitStatus.SUBMITTED)
    report = score(EnvironmentResolver(backend="local", mirror=suite.mirror).resolve(deck), deck, trajectory,
                   RewardConfig(perceptual_model=model))
    visual = next(t for t in report.tiers if t.name == "visual")
    assert report.resolved is resolved and visual.passed is resolved, visual.evidence
    ratings = [f["perceptual"] for m in visual.evidence["measures"].values() for f in m["frames"]]
    assert len(ratings) > 1 and all(r == pytest.approx(1 / (1 + math.exp(-3.0 if resolved else 3.0)), abs=1e-4) for r in ratings)
    assert bool(visual.evidence["violations"].get("perceptual")) is not resolved
