"""Tier visual of a front-end task: deterministic measures of the screenshots tier runtime took.

Per frame (a slide, or the whole page): the fraction of empty 16 px tiles (whitespace), the share
of the most common colour (dominance), where the ink's centre lies (balance; across both axes for
frames, across the width for a page, which flows downwards), and for every text box the WCAG
contrast between its ink and its background as rendered, so colour tricks (text the colour of its
background, text under another element) count as what the reader sees. No model is involved, unless
a perceptual scorer (`perceptual.py`) is given: then each frame is also rated by it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from swedojo.rewards.web.check import Check, from_groups
from swedojo.rewards.web.render import Shot
from swedojo.schema import VisualChecks

if TYPE_CHECKING:
    from swedojo.rewards.web.perceptual import PerceptualScorer

TILE = 16
"""Side of the tiles whitespace is counted in."""
UNIFORM = 8
"""A tile whose channels vary by at most this much is empty."""
INK = 48
"""A pixel whose colour differs from the background by more than this (summed over channels) is ink."""
LARGE_TEXT_PX = 24.0
LARGE_BOLD_TEXT_PX = 18.66
"""WCAG's large text (18 pt, or 14 pt bold): it needs a contrast of 3 rather than 4.5."""


def luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG relative luminance of sRGB colours (last axis RGB, 0..255)."""
    c = rgb.astype(np.float64) / 255.0
    linear = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def _mode_colour(pixels: np.ndarray) -> tuple[np.ndarray, float]:
    """The most common colour of an (N, 3) array and its share."""
    packed = (pixels[:, 0].astype(np.int64) << 16) | (pixels[:, 1].astype(np.int64) << 8) | pixels[:, 2]
    values, counts = np.unique(packed, return_counts=True)
    top = values[counts.argmax()]
    return np.array([(top >> 16) & 255, (top >> 8) & 255, top & 255]), counts.max() / len(packed)


def contrast(crop: np.ndarray) -> float | None:
    """WCAG contrast of a text box as rendered: its ink (the 98th percentile of contrast against the
    background, so a stray pixel does not count) against its most common colour. None if empty."""
    pixels = crop.reshape(-1, 3)
    if len(pixels) == 0:
        return None
    background, _ = _mode_colour(pixels)
    lum_bg = float(luminance(background))
    lum = luminance(pixels)
    ratios = (np.maximum(lum, lum_bg) + 0.05) / (np.minimum(lum, lum_bg) + 0.05)
    return float(np.percentile(ratios, 98))


def frame_measures(image: np.ndarray, framed: bool) -> dict[str, float]:
    """Whitespace fraction, colour dominance and imbalance of one frame's pixels (H, W, 3)."""
    h, w = image.shape[:2]
    th, tw = h // TILE, w // TILE
    tiles = image[: th * TILE, : tw * TILE].reshape(th, TILE, tw, TILE, 3).astype(np.int16)
    spread = (tiles.max(axis=(1, 3)) - tiles.min(axis=(1, 3))).max(axis=-1)
    whitespace = float((spread <= UNIFORM).mean()) if spread.size else 1.0
    background, dominance = _mode_colour(image.reshape(-1, 3))
    ink = np.abs(image.astype(np.int16) - background).sum(axis=-1) > INK
    if ink.any():
        ys, xs = np.nonzero(ink)
        dx, dy = abs(xs.mean() / w - 0.5) * 2, abs(ys.mean() / h - 0.5) * 2
        imbalance = max(dx, dy) if framed else dx
    else:
        imbalance = 1.0
    return {"whitespace": round(whitespace, 4), "dominance": round(float(dominance), 4), "imbalance": round(float(imbalance), 4)}


def visual_check(shots: list[Shot], checks: VisualChecks, scorer: PerceptualScorer | None = None) -> Check:
    """Tier visual over every screenshot: each frame's measures within bounds, every text readable,
    and, with `scorer`, each frame rated at least `checks.min_perceptual` (group `perceptual`, absent
    without a scorer: what was not rated has not passed)."""
    groups: dict[str, list[str]] = {"whitespace": [], "colour_dominance": [], "balance": [], "text_contrast": []}
    if scorer is not None:
        groups["perceptual"] = []
    measures: dict[str, Any] = {}
    low, high = checks.whitespace
    for shot in shots:
        image = np.asarray(Image.open(shot.png).convert("RGB"))
        key = f"{shot.page}@{shot.viewport.width}x{shot.viewport.height}"
        frames = []
        for index, box in enumerate(shot.frames):
            x, y = max(0, round(box["x"])), max(0, round(box["y"]))
            crop = image[y : y + round(box["h"]), x : x + round(box["w"])]
            where = f"{key} {box['where']}" + (f" #{index + 1}" if len(shot.frames) > 1 else "")
            if crop.size == 0:
                groups["whitespace"].append(f"{where}: nothing rendered")
                continue
            m = frame_measures(crop, shot.framed)
            frames.append(m)
            if scorer is not None:
                rating = scorer.score(crop)
                m["perceptual"] = round(rating, 4)
                if rating < checks.min_perceptual:
                    groups["perceptual"].append(f"{where}: rated {rating:.2f} by the perceptual model, "
                                                f"{checks.min_perceptual:.2f} required")
            if not low <= m["whitespace"] <= high:
                groups["whitespace"].append(f"{where}: {m['whitespace']:.2f} of it empty, {low:.2f}..{high:.2f} required")
            if m["dominance"] > checks.max_dominance:
                groups["colour_dominance"].append(f"{where}: one colour covers {m['dominance']:.2f}, at most {checks.max_dominance:.2f}")
            if m["imbalance"] > checks.max_imbalance:
                groups["balance"].append(f"{where}: ink centred {m['imbalance']:.2f} off the middle, at most {checks.max_imbalance:.2f}")
        ratios = []
        for text in shot.texts:
            large = text["font_px"] >= LARGE_TEXT_PX or (text["bold"] and text["font_px"] >= LARGE_BOLD_TEXT_PX)
            needed = 3.0 if large else checks.min_contrast
            for r in text["rects"]:
                x, y = max(0, int(r["x"])), max(0, int(r["y"]))
                ratio = contrast(image[y : int(r["y"] + r["h"]) + 1, x : int(r["x"] + r["w"]) + 1])
                if ratio is None:
                    continue
                ratios.append(ratio)
                if ratio < needed:
                    groups["text_contrast"].append(f"{key} {text['where']}: contrast {ratio:.2f}, {needed} required")
                    break
        measures[key] = {"screenshot": str(shot.png), "frames": frames,
                         "min_text_contrast": round(min(ratios), 2) if ratios else None}
    if not shots:
        return Check(0.0, False, {"not_rendered": "no screenshot was taken"})
    return from_groups(groups, {"measures": measures})
