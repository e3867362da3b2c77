"""Optional perceptual scorer of tier visual: a local image-classification checkpoint that rates a
screenshot, for what the deterministic measures (`visual.py`) cannot see.

Nothing is downloaded: the checkpoint is a directory saved by transformers (`save_pretrained` of an
`AutoModelForImageClassification` and its `AutoImageProcessor`). It is loaded once per path, on the
CPU in eval mode, and a broken one is refused when it is loaded, before any screenshot is scored.
torch and transformers are imported only then, so grading without a scorer never pays for them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from transformers import PreTrainedModel

GOOD_LABEL = "good"
"""The label whose probability is the score of a checkpoint with several outputs."""


class PerceptualModelError(Exception):
    """The perceptual model's directory is missing or holds no image-classification checkpoint."""


class PerceptualScorer:
    """Rates an image in [0, 1] with a local image-classification checkpoint.

    The score is, with one output (num_labels == 1), the sigmoid of its logit; otherwise the
    softmax probability of the label named `good` in id2label (case-insensitive) if there is one,
    else of the last label.
    """

    def __init__(self, path: Path, processor: object, model: PreTrainedModel) -> None:
        self.path, self.processor, self.model = path, processor, model
        labels = {str(name).lower(): int(index) for index, name in model.config.id2label.items()}
        self.label = None if model.config.num_labels == 1 else labels.get(GOOD_LABEL, model.config.num_labels - 1)
        """Index of the scored output; None when the single logit goes through a sigmoid."""

    def score(self, image: np.ndarray) -> float:
        """The score of one RGB image (H, W, 3) of 0..255."""
        import torch

        inputs = self.processor(images=image, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**inputs).logits[0].float()
        if self.label is None:
            return float(torch.sigmoid(logits[0]))
        return float(torch.softmax(logits, dim=-1)[self.label])


_loaded: dict[Path, PerceptualScorer] = {}
_loading = threading.Lock()


def load_scorer(path: Path) -> PerceptualScorer:
    """The scorer of the checkpoint at `path`, loaded on first use and kept for the process."""
    key = Path(path).expanduser().resolve()
    with _loading:
        if key not in _loaded:
            _loaded[key] = _load(key)
        return _loaded[key]


def _load(path: Path) -> PerceptualScorer:
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    if not path.is_dir():
        raise PerceptualModelError(f"perceptual model {path}: no such directory")
    try:
        processor = AutoImageProcessor.from_pretrained(path, local_files_only=True)
        model = AutoModelForImageClassification.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 (a loader fails in its own ways: pickle, safetensors, config, torch)
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        raise PerceptualModelError(f"perceptual model {path}: not an image-classification checkpoint ({why})") from exc
    return PerceptualScorer(path, processor, model.to("cpu").eval())
