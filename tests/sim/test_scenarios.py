"""Fixed fault lists: each reaches the situation of its bug, and runs clean with every fix."""

from __future__ import annotations

from tritonmq.sim.scenarios import SCENARIOS
from tritonmq.sim.trace import Trace
from tritonmq.sim.world import SimParams, World


def run_traced(seed: int, params: SimParams) -> tuple[str | None, str]:
    w = World(seed, params)
    w.trace = Trace(keep=1_000_000)
    r = w.run()
    return r.violation, w.trace.render(seed, r.violation)


def test_a_backup_whose_claim_on_a_live_primary_loses_follows_again() -> None:
    """Issue 6, bug 6: with the fix reverted (the lost claim keeps its suspicion) seeds 0,
    2 and 3 end with the backup out of the ISR for good (docs/testing.md); with it they
    reach the lost claim and the backup re-joins."""
    params = SimParams(scenario=SCENARIOS["lost-claim"], check_whole=True)
    for seed in (0, 2, 3):
        violation, trace = run_traced(seed, params)
        assert violation is None, trace
        assert "refuses connections: gone" in trace and "our claim lost" in trace


def test_a_backup_reset_after_a_purge_answers_resends_of_purged_batches_once() -> None:
    """Issue 6, bug 4: with the fix reverted (no dedup state in the ``leader`` frame)
    every one of seeds 0..99 delivers a resent record twice (docs/testing.md)."""
    params = SimParams(scenario=SCENARIOS["reset-dedup"], publish_until=8.0)
    for seed in (0, 1, 2):
        violation, trace = run_traced(seed, params)
        assert violation is None, trace
        assert "(reset=True)" in trace and "FAULT crash" in trace
