"""GRPO group advantages on known inputs."""

import math

import pytest

from swedojo.rewards.advantages import AdvantageConfig, LengthMismatchError, group_advantages

GROUPS = ["a", "b", "a", "c", "a", "b", "d", "d", "d"]
REWARDS = [1.0, 1.0, 0.0, 0.3, 0.0, 1.0, 0.0, 0.5, 1.0]
# a: [1, 0, 0] mean 1/3, unbiased std sqrt(1/3); b: [1, 1] flat; c: a group of one; d: std 0.5.
STD_A = math.sqrt(1 / 3)


def test_normalised_by_group_mean_and_unbiased_std():
    got = group_advantages(GROUPS, REWARDS, AdvantageConfig(eps=1e-12))
    want = [(2 / 3) / STD_A, 0.0, (-1 / 3) / STD_A, 0.0, (-1 / 3) / STD_A, 0.0, -1.0, 0.0, 1.0]
    assert got == pytest.approx(want, abs=1e-9)


def test_eps_keeps_flat_groups_finite_and_shrinks_the_rest():
    got = group_advantages(["x", "x", "y", "y"], [1.0, 1.0, 0.0, 1.0], AdvantageConfig(eps=0.5))
    std = math.sqrt(0.5)
    assert got == pytest.approx([0.0, 0.0, -0.5 / (std + 0.5), 0.5 / (std + 0.5)])


def test_without_std_division_is_reward_minus_mean():
    got = group_advantages(GROUPS, REWARDS, AdvantageConfig(normalize_by_std=False))
    assert got == pytest.approx([2 / 3, 0.0, -1 / 3, 0.0, -1 / 3, 0.0, -0.5, 0.0, 0.5])


def test_zero_variance_groups_are_dropped_when_asked():
    got = group_advantages(GROUPS, REWARDS, AdvantageConfig(drop_zero_variance=True, eps=1e-12))
    assert [a is None for a in got] == [False, True, False, True, False, True, False, False, False]
    assert got[6:] == pytest.approx([-1.0, 0.0, 1.0], abs=1e-9)


def test_lengths_must_match():
    with pytest.raises(LengthMismatchError, match="2 group ids for 1 rewards"):
        group_advantages(["a", "b"], [1.0], AdvantageConfig())
