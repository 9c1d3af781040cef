"""Fixed fault lists: each reaches the situation of its bug, and runs clean with every fix."""

from __future__ import annotations

import re

from tritonmq.sim.scenarios import SCENARIO_PARAMS, SCENARIOS
from tritonmq.sim.trace import Trace
from tritonmq.sim.world import SimParams, World


def run_traced(seed: int, params: SimParams) -> tuple[str | None, str]:
    w = World(seed, params)
    w.trace = Trace(keep=1_000_000)
    r = w.run()
    return r.violation, w.trace.render(seed, r.violation)


def test_a_backup_whose_claim_on_a_live_primary_loses_follows_again() -> None:
    """Issue 6, bug 6: with the fix reverted (the lost claim keeps its suspicion) seeds 1,
    2 and 4 end with the backup out of the ISR for good (docs/testing.md); with it they
    reach the lost claim and the backup re-joins."""
    params = SimParams(scenario=SCENARIOS["lost-claim"], check_whole=True)
    for seed in (1, 2, 4):
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


def test_a_restarted_follower_is_not_admitted_on_a_new_primary_s_inherited_commit_point() -> None:
    """Issue 6, bug 1: the primary dies just after acknowledging a batch its backups do
    not know committed; the new primary's ISR keeps a member that cannot re-attach, so
    the commit point it inherited (behind what was acknowledged) stays; the old primary
    restarts and catches up one entry per append. With the fix reverted (admitted once
    its acks pass that commit point) 15 of scenario seeds 0..99 name it in sync while it
    lacks acknowledged records, seeds 2, 12 and 16 among them (docs/testing.md). Seed 11
    (and 7 more of 0..49) left the group refusing writes for good after the others died,
    before BrokerCore made a follower whose catch-up a purge overtook follow again."""
    params = SimParams(scenario=SCENARIOS["stale-commit"], **SCENARIO_PARAMS["stale-commit"])  # type: ignore[arg-type]
    for seed in (2, 12, 16, 11):
        violation, trace = run_traced(seed, params)
        assert violation is None, trace
        assert "(reset=True)" in trace and "primary of g0: epoch 3" in trace
        assert re.search(
            r"proposing epoch 2 isr \['g0b0', 'g0b1', 'g0b2'\]: g0b\d caught up", trace
        )
