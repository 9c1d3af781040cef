"""Fixed fault lists: each reaches the situation of its bug, and runs clean with every fix."""

from __future__ import annotations

import re

from tritonmq.sim.scenarios import SCENARIO_PARAMS, SCENARIOS, with_scenario
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


def test_a_primary_whose_isr_cas_outcome_is_unknown_re_reads_and_keeps_committing() -> None:
    """Issue 6, bug 3: a ConnectionLoss on the primary's ISR CAS (outcome unknown). The
    pre-BrokerCore shell's proposing task died there and left the proposal set, so the
    group never acknowledged again (this seed found it, as did 159 and 189); BrokerCore
    re-reads and judges the outcome (``tests/unit/test_core_broker.py``, "bug 3")."""
    violation, trace = run_traced(12, SimParams())
    assert violation is None, trace
    assert "ConnectionLoss on g0b0's cas:" in trace
    assert "isr CAS outcome unknown; re-reading" in trace


def test_a_reset_follower_is_not_admitted_to_the_isr_before_it_holds_anything() -> None:
    """Found by the simulator: ``PrimaryCore.attach`` counted a follower that starts by
    *reset* as holding everything up to the primary's base before it had even received
    the ``leader`` frame, and the next view proposed it into the ISR while its log was
    still empty from ts 1 (elected then, it would have reused acknowledged ts values).
    This seed broke "in-sync replicas hold what was acknowledged" before core commit
    90e6249 (docs/testing.md)."""
    violation, trace = run_traced(332, SimParams())
    assert violation is None, trace
    assert "starts after ts 36 (reset=True)" in trace  # the situation of the bug


# The slot-swaps scenario (docs/replication.md M9): both failed before loads had request
# numbers of their own and registrations answered with their era.


def test_a_named_sub_at_the_new_owner_does_not_adopt_the_old_group_s_offset() -> None:
    """Scenario seed 37 (docs/testing.md, "Slot swaps"): g1 completes the move of slot 9
    (``g0.m3``) at 1.18 s; ``md``'s `sub` reaches it at 1.80 s and waits for a load; the
    answer to a load g1 sent at 1.05 s, before it owned the slot, lists none of the slot's
    subscriptions and releases it; ``md`` is created afresh at era 1 and registered, and
    ZooKeeper answers with g0's offset (era 0, ts 30), taken as era 1's: g1's records of
    ``g0.m3`` at ts 20..30 are never delivered and later purged."""
    params = with_scenario(SimParams(), "slot-swaps")
    violation, trace = run_traced(37, params)
    assert violation is None, trace


def test_the_new_owner_purges_nothing_of_its_era_on_a_load_read_before_it_owned_the_slot() -> None:
    """Scenario seed 1: g1 completes the move of slot 73 (``g0.m``) at 1.26 s and reloads
    the subscriptions, purging nothing until that load is answered; the answers to loads
    it sent at 1.05-1.16 s, before it owned the slot, come first (1.52 s, 1.76 s), list
    none of the slot's subscriptions, and let purge run: g1 purges its era 1 records of
    ``g0.m`` that ``md`` (stored at era 0, pending at g1) has not received."""
    params = with_scenario(SimParams(), "slot-swaps")
    violation, trace = run_traced(1, params)
    assert violation is None, trace


def test_the_slot_swaps_scenario_draws_busy_groups_moving_every_slot_and_its_replay_hint_names_it() -> (
    None
):
    params = with_scenario(SimParams(), "slot-swaps")
    w = World(0, params)
    assert w._flags() == " --scenario slot-swaps"
    assert 0.2 <= w.broker.offset_interval <= 1.5  # drawn per seed
    topics = {getattr(make(), "topic", "") for name, make in w.factories.items() if "b" not in name}
    assert {"g0.m", "g0.m3", "g1.m3", "g0.b9"} <= topics and "g1.b0" not in topics
    moves = [f for f in params.scenario if f.kind.value == "move-slot"]
    assert len(moves) == 3 * 2 * 4 and min(f.at for f in moves) == 1.0


def test_slot_swaps_seeds_break_no_invariant() -> None:
    """A sweep of the scenario CI runs (docs/testing.md): on the code before M9, 38 of
    seeds 0..99 broke an invariant."""
    params = with_scenario(SimParams(), "slot-swaps")
    for seed in range(40):
        violation, trace = run_traced(seed, params)
        assert violation is None, f"seed {seed}: {violation}"
