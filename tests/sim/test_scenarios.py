"""Fixed fault lists: each reaches the situation of its bug, and runs clean with every fix."""

from __future__ import annotations

import dataclasses
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
    2 and 4 end with the backup out of the ISR for good (docs/findings.md); with it they
    reach the lost claim and the backup re-joins."""
    params = SimParams(scenario=SCENARIOS["lost-claim"], check_whole=True)
    for seed in (1, 2, 4):
        violation, trace = run_traced(seed, params)
        assert violation is None, trace
        assert "refuses connections: gone" in trace and "our claim lost" in trace


def test_a_backup_reset_after_a_purge_answers_resends_of_purged_batches_once() -> None:
    """Issue 6, bug 4: with the fix reverted (no dedup state in the ``leader`` frame)
    every one of seeds 0..99 delivers a resent record twice (docs/findings.md)."""
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
    lacks acknowledged records, seeds 2, 12 and 16 among them (docs/findings.md). Seed 11
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
    90e6249 (docs/findings.md)."""
    violation, trace = run_traced(332, SimParams())
    assert violation is None, trace
    assert "starts after ts 36 (reset=True)" in trace  # the situation of the bug


# The slot-swaps scenario (docs/replication.md M9): both failed before loads had request
# numbers of their own and registrations answered with their era.


def test_a_named_sub_at_the_new_owner_does_not_adopt_the_old_group_s_offset() -> None:
    """Scenario seed 37 (docs/findings.md, "Slot swaps"): g1 completes the move of slot 9
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
    """A sweep of the scenario CI runs (docs/findings.md): on the code before M9, 38 of
    seeds 0..99 broke an invariant."""
    params = with_scenario(SimParams(), "slot-swaps")
    for seed in range(40):
        violation, trace = run_traced(seed, params)
        assert violation is None, f"seed {seed}: {violation}"


# --- Seeds that found a bug, kept as named regressions -------------------------------------
# Each ran a random setting of `tritonmq sim` (the flags below) and broke an invariant until
# the fix its docstring names; product code and docs cite these tests, not the seed numbers.
# The seeds still run clean, but code changed since may have moved their draws away from the
# exact window they found (docs/findings.md tells each story): they are regressions, the
# unit tests named are the rules' own checks. About 0.2-0.6 s of CPU each.

CI = SimParams(refusals=True, check_whole=True)
TWO_GROUPS = SimParams(groups=2)
TWO_GROUPS_WHOLE = SimParams(groups=2, refusals=True, check_whole=True)
G2_MOVES_8 = SimParams(groups=2, moves=8, faults=8, refusals=True)
G2_MOVES_8_WHOLE = dataclasses.replace(G2_MOVES_8, check_whole=True)
G3_MOVES_6 = SimParams(groups=3, moves=6, refusals=True, check_whole=True)
G3_MOVES_10 = SimParams(groups=3, moves=10, faults=10, refusals=True, check_whole=True)
G4_MOVES_8 = SimParams(groups=4, moves=8, faults=8, refusals=True, check_whole=True)
G4_MOVES_10 = dataclasses.replace(G3_MOVES_10, groups=4)


def assert_clean(seed: int, params: SimParams, flags: str) -> None:
    """``tritonmq sim --seed {seed}{flags}`` breaks no invariant."""
    w = World(seed, params)
    assert w._flags() == flags, "the replay command the docstring names"
    r = w.run()
    assert r.violation is None, r.trace


# Replication: elections, the ISR, purges (one group unless said)


def test_a_shared_member_back_without_what_it_held_waits_for_the_others() -> None:
    """Seed 39 (S7): the old primary, refusing its backups, kept handing shared records
    out after the election; a member back without what it held got them again.
    ``test_delivery.py::test_a_member_back_without_what_the_old_primary_said_it_held_waits_for_the_others``."""
    assert_clean(39, CI, " --refusals --check-whole")


def test_a_shared_subscription_s_acknowledgements_survive_a_failover() -> None:
    """Seed 23 (S7): with only the 1 s hold, a record acknowledged by one member of a
    shared subscription reached another after a failover (`no-duplicate-delivery`)."""
    assert_clean(23, SimParams(), "")


def test_earliest_on_an_empty_topic_moves_no_durable_offset() -> None:
    """Seed 1340: attaching with ``earliest`` to a durable subscription of an empty topic
    moved its offset to the commit point, ahead of every ack (`offset-not-ahead`).
    ``test_delivery.py::test_earliest_on_an_empty_topic_moves_no_durable_offset``."""
    assert_clean(1340, CI, " --refusals --check-whole")


def test_an_isr_cas_of_unknown_outcome_is_judged_by_a_read_begun_after_it() -> None:
    """Seed 22212 (R4a): an ISR grow hit by ConnectionLoss was written, but judged by a
    view read before it landed: the primary stopped counting the member ZooKeeper named
    in sync and acknowledged without it (`isr-holds-acked`)."""
    assert_clean(22212, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_view_read_before_an_isr_cas_landed_does_not_shrink_the_isr() -> None:
    """Seed 12523 (R2): a view read before the primary's ISR CAS landed arrived after its
    answer and shrank the in-memory ISR below ZooKeeper's; ts 40 was acknowledged without
    g0b0's copy. ``test_core_broker.py::test_a_view_read_before_an_isr_cas_landed_does_not_undo_it``."""
    assert_clean(12523, G4_MOVES_10, " --groups 4 --moves 10 --faults 10 --refusals --check-whole")


def test_a_backup_whose_suspect_answers_after_all_follows_the_epoch_the_view_names() -> None:
    """Seed 30361 (F1): a backup's suspect, elected again, connected after all; the
    suspicion ended but the backup did not decide again, kept following the old epoch,
    refused as stale, and never re-joined the ISR (`group-whole`)."""
    assert_clean(
        30361, G2_MOVES_8_WHOLE, " --groups 2 --moves 8 --faults 8 --refusals --check-whole"
    )


def test_a_durable_sub_is_answered_only_once_zookeeper_holds_it() -> None:
    """Seed 139 (S4): a durable ``sub`` answered before its registration landed (it failed
    and was never asked again) left a subscription only the dying primary knew; its
    successor purged what the subscriber needed. Since then the core says every purge,
    even with no follower, so the checker sees the purge itself."""
    assert_clean(139, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")


def test_no_registration_is_asked_while_the_session_is_not_connected() -> None:
    """Seed 7288: a primary cut from ZooKeeper retried ``durable``'s registration; it
    landed on the client's new session after the successor had loaded the subscriptions,
    and the successor purged past it (`g0.t purged up to 14; durable never received ts 4`)."""
    assert_clean(7288, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_subscription_a_deposed_primary_registered_is_taken_at_zookeeper_s_offset() -> None:
    """Seed 3833 (S1): a primary deposed while alive registered the shared ``mls`` after
    its successor loaded; the successor declared it afresh at its commit point and
    stored 65 over 14..65, never handed out. Closed by fencing registrations and offset
    writes with the group state's version."""
    assert_clean(3833, G4_MOVES_10, " --groups 4 --moves 10 --faults 10 --refusals --check-whole")


def test_a_primary_cut_from_zookeeper_purges_nothing() -> None:
    """Seed 18684 (S3): g0b2, frozen and cut off, woke still primary in its own eyes and
    purged ``g0.m`` past the shared ``mls`` its successor had registered."""
    assert_clean(18684, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_primary_that_heard_nothing_for_a_session_timeout_reads_zookeeper_before_purging() -> (
    None
):
    """Seed 74193 (S3): g1b1, frozen 2.3 s, woke to an offset store's answer before any
    session event and purged ``g1.m`` past ``mls``, registered by its successor."""
    assert_clean(74193, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_primary_purges_what_its_follower_purged_before_a_durable_sub_starts_from_it() -> None:
    """Seed 360 (S3): ``mls`` created at ``earliest`` from records the backups had purged
    under another primary; restored at a successor without them, its offset was stored
    over records never handed out (`offset-not-ahead`)."""
    assert_clean(360, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")


def test_a_follower_lacking_records_a_reader_of_ours_holds_stays_out_of_the_isr() -> None:
    """Seed 317: a backup that had purged records the primary kept for a shared reader
    was in the ISR; elected, it lost them for that reader."""
    assert_clean(317, G4_MOVES_8, " --groups 4 --moves 8 --faults 8 --refusals --check-whole")


def test_a_backup_that_caught_up_over_purged_records_tells_a_resuming_reader_once_elected() -> None:
    """Seed 186 (S6): a backup that caught up over purged entries (``None``) never learnt
    their topics; elected, it let an unnamed reader of ``g1.u`` skip them silently."""
    assert_clean(186, G2_MOVES_8, " --groups 2 --moves 8 --faults 8 --refusals")


# Slot moves (docs/replication.md M1-M9)


def test_a_retry_is_answered_with_its_own_slot_s_era_not_the_handover_s() -> None:
    """Seed 64 (M8): a handover carries every slot's purged uuids; a retry of ``g1.m``
    was answered with the era of slot 1's handover, an era its slot never had."""
    assert_clean(64, TWO_GROUPS, " --groups 2")


def test_a_resumed_broadcast_reader_acknowledges_again_what_it_acknowledged() -> None:
    """Seed 11 (C6, the simulated client): an ack lost with a primary was never repeated
    once a sealed era brought no later record to acknowledge."""
    assert_clean(11, TWO_GROUPS, " --groups 2")


def test_the_new_owner_purges_nothing_before_it_reloaded_the_subscriptions() -> None:
    """Seed 7 (M5): the group a slot moved to purged the new era's records as they
    committed, before it had read the subscriptions stored at the old era."""
    assert_clean(7, TWO_GROUPS, " --groups 2")


def test_a_batch_behind_one_refused_wrong_group_waits_for_its_resend_across_a_roll_back() -> None:
    """Seed 116 (M2): batch 1 refused with ``WRONG_GROUP``, the move rolled back, and
    batch 3, pipelined behind it, stored first at the old group (`producer-order`)."""
    assert_clean(116, G2_MOVES_8, " --groups 2 --moves 8 --faults 8 --refusals")


def test_a_view_read_before_our_completing_step_landed_does_not_undo_the_move() -> None:
    """Seed 44767 (M1): a view read before the slot CAS landed arrived after it and its
    older histories were taken; the reload loaded nothing of ``g1.m`` and g0 purged era 3
    past ``md``."""
    assert_clean(44767, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_new_primary_takes_no_write_before_it_read_the_map_as_primary() -> None:
    """Seed 373 (M7): a primary elected on a suspicion served with a view from before the
    move began and wrote the slot after the other group completed it (two writers)."""
    assert_clean(373, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")


def test_a_new_primary_seals_only_once_every_isr_member_followed_it() -> None:
    """Seed 3174 (M7): sealed on an inherited commit point while an ISR member held an
    earlier epoch's records above it; elected next, that member committed them above the
    seal point."""
    assert_clean(3174, G4_MOVES_10, " --groups 4 --moves 10 --faults 10 --refusals --check-whole")


def test_a_retry_straddling_two_moves_is_answered_at_the_third_group() -> None:
    """Seed 357 (M2.3): ``g1.m``'s record stored at g1 in era 0 was stored again at g0 in
    era 2 (also seed 1466 of ``--groups 3 --moves 10 --faults 10 --refusals``)."""
    assert_clean(357, G4_MOVES_8, " --groups 4 --moves 8 --faults 8 --refusals --check-whole")


def test_a_group_that_moved_its_era_on_keeps_it_for_a_subscription_of_an_older_era() -> None:
    """Seed 267 (M5): slot 15 went g2 -> g1 -> g0 with ``md`` still at era 0; g1, which
    held era 1 and moved the slot on, purged era 1 for nobody."""
    assert_clean(267, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")


def test_a_roll_back_delivers_what_was_written_before_the_cap_was_lifted() -> None:
    """Seed 492 (M5): a roll back's first record committed while ``md``'s cap held was
    pushed to nobody, and no later record came to push it."""
    assert_clean(492, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")


def test_a_stored_hand_on_purges_nothing_of_a_later_era_we_hold_for_it() -> None:
    """Seed 4588 (M5; also 6689 of ``--groups 3``): until a stored hand-on was let go on
    the next tick, its offset was the next era's ``after`` and purge took our later era."""
    assert_clean(4588, G4_MOVES_10, " --groups 4 --moves 10 --faults 10 --refusals --check-whole")


def test_a_load_read_before_a_stored_hand_on_does_not_bring_the_subscription_back() -> None:
    """Seed 12275 (M5; also 12507): a load read before the hand-on's store brought the
    shared ``ms`` back at its old era, and its members' acknowledged records went out
    again, to another member."""
    assert_clean(12275, G4_MOVES_10, " --groups 4 --moves 10 --faults 10 --refusals --check-whole")


def test_a_load_naming_an_era_the_view_has_not_seen_is_read_again() -> None:
    """Seed 18110 (M5): a primary elected with a view from before a move loaded ``md`` as
    its own at era 0; it held the ended era for good, its backups stayed out of the ISR,
    and the producer waited forever."""
    assert_clean(18110, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_hand_on_written_again_never_sends_an_offset_back_an_era() -> None:
    """Seed 34280 (M5): g1 wrote its hand-on of ``md`` again after g2 had handed it on;
    ``md`` went back to an era g2 had let go and its reader bounced between groups."""
    assert_clean(34280, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_new_primary_hands_on_again_what_its_predecessor_handed_on_and_did_not_store() -> None:
    """Seed 41050 (M5): served from ZooKeeper's offset instead, ``ms``'s members were handed
    the era's acknowledged records a second time."""
    assert_clean(41050, G4_MOVES_10, " --groups 4 --moves 10 --faults 10 --refusals --check-whole")


def test_attaching_with_earliest_moves_no_durable_offset_over_other_topics_records() -> None:
    """Seed 2327 (also 2881, 3557, 4453): a subscription whose oldest retained record was
    above its offset took that record as its position, an offset over other topics' ts
    ahead of every ack."""
    assert_clean(2327, G4_MOVES_10, " --groups 4 --moves 10 --faults 10 --refusals --check-whole")


def test_a_shared_subscription_is_restored_only_from_a_state_of_its_era() -> None:
    """Seed 24551 (S7): restored at the group's later era from a state sent when the group
    handed ``ms`` on, its offset jumped over that era's records."""
    assert_clean(24551, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_a_restored_shared_subscription_hands_out_nothing_above_its_era_s_seal_point() -> None:
    """Seed 5471 (M5): a restore's gap ran over a later era's records of a slot held again,
    and they went out as the ended era's."""
    assert_clean(5471, G3_MOVES_10, " --groups 3 --moves 10 --faults 10 --refusals --check-whole")


def test_the_old_primary_seals_only_while_its_isr_is_min_insync_strong() -> None:
    """Seed 126 (also 188): a primary whose ISR had shrunk to itself sealed a moving slot,
    and a retry was acknowledged from the handover with one copy (`acked-min-insync`)."""
    assert_clean(126, TWO_GROUPS, " --groups 2")


def test_a_batch_behind_one_refused_for_a_moving_slot_is_refused_too_on_that_connection() -> None:
    """Seed 724: batch 1 refused "moving here", batch 2 right behind it stored once the
    move completed, and batch 1's resend stored after it (`producer-order`)."""
    assert_clean(724, TWO_GROUPS_WHOLE, " --groups 2 --refusals --check-whole")


def test_a_subscription_pending_at_a_group_holding_the_slot_again_writes_no_offset() -> None:
    """Seed 100 (M5): a hand-on's late answer made a subscription pending at a group holding
    the slot again write (era 2, ts 0), and era 0's records went out again as era 2's."""
    assert_clean(100, TWO_GROUPS_WHOLE, " --groups 2 --refusals --check-whole")


def test_the_old_group_creates_no_durable_subscription_while_the_move_runs() -> None:
    """Seed 477 (M5): ``md``'s first ``sub`` reached g0 just after it sealed the slot and was
    created at the era that ended; the new owner never learnt of it (`producer-order` at
    the reader)."""
    assert_clean(477, G2_MOVES_8, " --groups 2 --moves 8 --faults 8 --refusals")


def test_attaching_with_earliest_on_a_moved_slot_moves_no_offset_over_other_topics_ts() -> None:
    """Seed 40: the late ``ml``, declared while ``g2.m`` had no record of era 2, took the
    era's oldest record as its position (`offset-not-ahead`)."""
    assert_clean(40, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")


def test_a_shared_subscription_pending_at_the_owner_starts_afresh_at_its_era() -> None:
    """Seed 553 (M5): ``mls`` restored from a shared state in another group's ts; its
    members were handed nothing of era 3 below 31 (`offset-not-ahead`)."""
    assert_clean(553, G2_MOVES_8, " --groups 2 --moves 8 --faults 8 --refusals")


def test_a_durable_resume_below_its_era_at_a_group_holding_the_slot_again_reads_only_its_era() -> (
    None
):
    """Seed 10 (M5): ``ml`` resumed from (era 2, ts 1) at a group holding the slot again,
    which served its era 0 records as era 2's."""
    assert_clean(10, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")


def test_the_old_group_seals_only_once_zookeeper_holds_its_subscriptions_of_the_slot() -> None:
    """Seed 240 (M5): ``ml``, declared at g0 while cut from ZooKeeper, registered after the
    move completed at g2, whose reload missed it and purged its era for nobody."""
    assert_clean(240, G3_MOVES_6, " --groups 3 --moves 6 --refusals --check-whole")
