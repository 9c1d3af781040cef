"""Whole simulated runs: determinism, replay, and faults the world must express."""

from __future__ import annotations

import heapq
import os
import subprocess
import sys

from tritonmq.coord import paths
from tritonmq.sim.node import Closed, Dialed, DialOut, ZkReplied, ZkRequest
from tritonmq.sim.params import CHROOT, under
from tritonmq.sim.world import SimParams, World, _ToNode, _WatchDue, _ZkArrive
from tritonmq.sim.zkmodel import Outcome, ZkCreate, ZkSet


def test_the_same_seed_gives_the_same_trace_bit_for_bit() -> None:
    a, b = World(42).run(), World(42).run()
    assert (a.digest, a.steps, a.trace) == (b.digest, b.steps, b.trace)
    assert World(43).run().digest != a.digest


def test_a_seed_replays_identically_in_another_process_with_another_hash_seed() -> None:
    code = "from tritonmq.sim.world import World; print(World(7).run().digest)"
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": h},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for h in ("1", "2")
    }
    assert digests == {World(7).run().digest}


def test_a_run_without_faults_delivers_every_acknowledged_record() -> None:
    w = World(3, SimParams(faults=0))
    r = w.run()
    assert r.violation is None
    h = w.history
    acked = h.topic_acked["g0.t"]
    assert len(acked) >= 15
    assert set(acked) <= h.apps["g0s0"].ts  # every acknowledged record reached the durable app
    shared = h.apps["g0s1"].ts | h.apps["g0s2"].ts
    assert set(acked) <= shared  # and the shared subscription, split between its members
    assert set(h.topic_acked["g0.u"]) <= h.apps["g0s4"].ts


def test_a_crash_of_the_primary_fails_over_without_loss() -> None:
    """Seed 1 makes watches late, then crashes the primary of epoch 1 and cuts a backup
    from ZooKeeper; a backup takes epoch 2 and every acknowledged record still reaches
    every durable subscription."""
    w = World(1)
    r = w.run()
    assert r.violation is None, r.trace
    assert any("crash g0b1" in f for f in w.trace.faults)
    assert w.history.writers[("g0", 1)].startswith("g0b1/")
    assert not w.history.writers[("g0", 2)].startswith("g0b1/")
    assert set(w.history.topic_acked["g0.t"]) <= w.history.apps["g0s0"].ts


def test_connection_loss_on_a_cas_leaves_its_outcome_unknown_to_the_caller() -> None:
    """The caller of a CAS hit by ConnectionLoss hears UNKNOWN; whether ZooKeeper applied
    the write is up to the seed, and both happen."""
    outcomes = set()
    for seed in range(30):
        w = World(seed, SimParams(faults=0))
        sid = w.sessions["g0b0"]
        w.zk.apply(sid, ZkCreate("/x", "v0"))
        w.zk_flaky["g0"] = 1
        w.queue.clear()
        w._zk_send("g0b0", ZkRequest("t", ZkSet("/x", "v1", 0)))
        replies = []
        while w.queue and not replies:
            t, _, ev = heapq.heappop(w.queue)
            w.now = t
            if isinstance(ev, _ToNode) and isinstance(ev.ev, ZkReplied):
                replies.append(ev.ev.result.outcome)
            elif isinstance(ev, _ZkArrive):
                w._step(ev)
        assert replies == [Outcome.UNKNOWN]
        outcomes.add(w.zk.nodes["/x"].data)
        assert "ConnectionLoss on g0b0's t (/x)" in w.trace.faults[-1]
    assert outcomes == {"v0", "v1"}  # sometimes written, sometimes not


def test_a_connection_reset_never_reaches_a_node_before_it_knew_the_connection() -> None:
    """A peer that crashes right after accepting: the dialer hears "connected", then
    "closed" (the kernel's reset follows the open), never the other way round, or it
    would keep a dead connection for good (a producer stalled after healing)."""
    for seed in range(40):
        w = World(seed, SimParams(faults=0))
        w.queue.clear()
        w._perform("g0p0", DialOut("g0b0", "client", "probe"))
        w._crash("g0b0")
        seen = []
        while w.queue:
            t, _, ev = heapq.heappop(w.queue)
            if isinstance(ev, _ToNode) and ev.node == "g0p0":
                if isinstance(ev.ev, Dialed | Closed):
                    seen.append(type(ev.ev).__name__)
        assert seen == ["Dialed", "Closed"], (seed, seen)


def test_refusals_from_a_live_primary_leave_no_stale_suspicion() -> None:
    """Found by the simulator once live brokers could refuse connections (seeds 34, 559):
    a claim of unknown outcome that did not happen kept its suspicion, and the backup
    waited on it for good (34); a backup kept suspecting a primary it then followed again,
    and later deposed it on that old suspicion (559). Both fixed in BrokerCore."""
    params = SimParams(refusals=True, check_whole=True)
    for seed in (34, 559):
        r = World(seed, params).run()
        assert r.violation is None, r.trace


def test_a_member_that_registered_during_an_isr_cas_re_joins_the_isr() -> None:
    """Seed 80 with refusals broke ``group-whole``: g0b0 followed from ts 0 and acknowledged
    every append but was never proposed into the ISR (its registration was seen only in a
    view that came while the primary's ISR CAS was in flight). Fixed in BrokerCore."""
    r = World(80, SimParams(refusals=True, check_whole=True)).run()
    assert r.violation is None, r.trace


def test_a_primary_elected_on_a_suspicion_follows_the_suspect_elected_after_it() -> None:
    """Seeds 157, 695, 915, 1020, 1511, 1603, 1844 and 1854 with refusals broke
    ``group-whole``: a backup that suspected its primary won the next epoch and kept the
    suspicion; when the suspect was elected after it, it stepped down and waited for good
    (``an in-sync replica will take over``) instead of following. Fixed in BrokerCore."""
    params = SimParams(refusals=True, check_whole=True)
    for seed in (157, 695, 1854):
        r = World(seed, params).run()
        assert r.violation is None, r.trace


def test_a_restarted_broker_hears_of_changes_while_its_old_incarnation_s_watch_is_late() -> None:
    """Seed 30 with ``check_whole`` broke ``group-whole``: the crashed g0b2's old session
    expired at restart and fired its watch, late by up to 2.7 s; the world coalesced every
    notification for the new incarnation into that one and then dropped it as stale, so the
    restarted g0b2 never re-read the group and waited for good on a view without the
    primary. A notification belongs to one incarnation (a simulator bug, not the core's)."""
    w = World(0, SimParams(faults=0))
    w.queue.clear()
    prefix = under(paths.group(CHROOT, "g0"))
    old = w.sessions["g0b2"]
    w.zk.watch(old, prefix)
    w.watch_delay = 2.0
    w._crash("g0b2")
    w._fire_watch(old, prefix)  # for the dead incarnation, late
    w._start("g0b2")
    new = w.sessions["g0b2"]
    w.zk.watch(new, prefix)
    w._fire_watch(new, prefix)  # a change the new incarnation must hear of
    heard: list[int] = []
    while w.queue:
        t, _, ev = heapq.heappop(w.queue)
        w.now = t
        if isinstance(ev, _WatchDue) and ev.node == "g0b2":
            heard.append(ev.inc)
    assert w.inc["g0b2"] in heard
    r = World(30, SimParams(check_whole=True)).run()
    assert r.violation is None, r.trace


def test_with_two_groups_slots_move_under_faults_and_every_move_ends() -> None:
    """Seed 12 of `tritonmq sim --groups 2`: g0.m's slot moves to g1 while producers run;
    the producer of g0.m has records acknowledged in both groups, each once, every reader
    of g0.m (durable broadcast and shared, unnamed, and the two created late) reads both
    eras, and the run breaks no invariant. (Seed 0 until the moved topics got their
    shared and late readers: those draws changed every run with moves.)"""
    from tritonmq.core.slothistory import SlotState
    from tritonmq.sim import slotmodel

    w = World(12, SimParams(groups=2))
    r = w.run()
    assert r.violation is None, r.trace
    assert "move slot 1 (g0.m) from g0 to g1" in r.trace
    h = slotmodel.history_of(w.zk, "g0.m")
    assert h is not None and h.state is SlotState.NORMAL and h.owner == "g1" and h.era == 1
    mine = {u for u, (p, _) in w.history.published_by.items() if p == "g0p2"}
    assert mine & set(w.history.acked["g0"].values()) and mine & set(w.history.acked["g1"].values())
    readers = [a for a in w.history.apps.values() if a.topic == "g0.m"]
    assert len(readers) == 6
    assert all({era for era, _ in a.pos} == {0, 1} for a in readers)
    assert World(12, SimParams(groups=2)).run().digest == r.digest


def test_without_moves_a_two_group_run_draws_what_it_always_drew() -> None:
    """--moves 0 (or one group) creates no slot map and draws nothing more: the digests of
    seeds cited before moves existed stay the same."""
    w = World(5, SimParams(groups=2, moves=0))
    r = w.run()
    assert "/cluster" not in w.zk.nodes and "move slot" not in r.trace
    assert not w.moving
    # World(5, groups=2) before moves, as re-pinned when a new durable `sub` began to wait
    # for ZooKeeper, and again when a backup's dedup state came in pages of three (a broker
    # change moves the trace; a draw added by moves would too; with pages as large as
    # before, it is 17d975701fdfafac364974066f24abda still), and when every role change
    # came to be logged (from -> to) by the core's one gate (it was 708ab293... before)
    assert r.digest == "1d5ef7185200d4a6bb36d9c52390649f"
