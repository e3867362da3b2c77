"""Group semantics: report a full group, refill one where more than half survive, drop the rest."""

from swedojo.serve.groups import Done, Drop, Refill, decide, is_stale


def test_a_full_group_is_done_and_a_majority_is_refilled_with_what_is_missing():
    assert decide(4, 4, 0, 2) == Done()
    assert decide(4, 3, 0, 2) == Refill(1)
    assert decide(3, 2, 1, 2) == Refill(1)


def test_half_or_fewer_or_refills_used_up_drop_the_group():
    assert isinstance(decide(4, 2, 0, 2), Drop)  # exactly half is not more than half
    assert isinstance(decide(3, 1, 0, 2), Drop)
    assert isinstance(decide(1, 0, 0, 2), Drop)
    spent = decide(4, 3, 2, 2)
    assert isinstance(spent, Drop) and "max_refill_rounds=2" in spent.reason


def test_staleness_counts_versions_behind_the_current_one():
    assert not is_stale(3, 5, None)
    assert not is_stale(3, 5, 2)
    assert is_stale(3, 6, 2)
    assert is_stale(0, 1, 0)
