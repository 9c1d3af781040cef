"""Invariants checked by the simulator, on hand-made histories."""

from __future__ import annotations

from tritonmq.sim.invariants import History


def test_a_replica_that_never_rejoined_the_isr_after_healing_is_a_violation() -> None:
    h = History(min_insync=2)
    h.check_group_whole("g0", ("g0b0", "g0b1", "g0b2"), ["g0b0", "g0b1", "g0b2"])
    assert h.violations == []
    h.check_group_whole("g0", ("g0b0", "g0b2"), ["g0b0", "g0b1", "g0b2"])
    assert h.violations == ["after healing, g0's ISR is ['g0b0', 'g0b2']: ['g0b1'] never re-joined"]
