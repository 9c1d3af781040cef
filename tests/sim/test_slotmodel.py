"""The slot map in the simulated ZooKeeper: the real cluster's JSON, CAS on both versions."""

from __future__ import annotations

import json

from tritonmq.core.slothistory import SlotHistory, SlotState, begin_move, roll_back
from tritonmq.core.slots import slot_of
from tritonmq.sim import slotmodel
from tritonmq.sim.zkmodel import Outcome, ZkModel

TOPICS = {"g0.t": "g0", "g0.u": "g0", "g0.m": "g0", "g1.t": "g1", "g1.u": "g1", "g1.m": "g1"}


def test_each_topic_gets_a_slot_of_its_own_owned_by_its_group() -> None:
    owners = slotmodel.plan_owners(["g1", "g0"], TOPICS)
    slots = {t: slot_of(t, len(owners)) for t in TOPICS}
    assert len(set(slots.values())) == len(TOPICS)
    assert all(owners[slots[t]] == g for t, g in TOPICS.items())
    assert set(owners) == {"g0", "g1"} and len(owners) >= 8


def test_the_map_is_written_as_the_real_cluster_writes_it_and_read_back() -> None:
    zk = ZkModel(2.0)
    slotmodel.create(zk, ("g0", "g1"))
    assert json.loads(zk.nodes["/cluster"].data) == {"slots": 2, "version": 0}
    assert json.loads(zk.nodes["/slots/1"].data) == {"group": "g1", "state": "normal"}
    r = slotmodel.read(zk.nodes)
    assert r is not None and r.smap.owners == ("g0", "g1") and r.map_version == 0
    assert r.histories == (SlotHistory("g0"), SlotHistory("g1"))


def test_a_step_is_one_cas_on_the_slot_and_cluster_versions_bumping_the_map_version() -> None:
    zk = ZkModel(2.0)
    slotmodel.create(zk, ("g0", "g1"))
    r = slotmodel.read(zk.nodes)
    assert r is not None
    s = zk.open_session("b", 0.0)
    moved = begin_move(r.histories[0], "g1")
    done, _ = zk.apply(s, r.cas(0, moved))
    assert done.outcome is Outcome.OK
    again, _ = zk.apply(s, r.cas(1, begin_move(r.histories[1], "g0")))
    assert again.outcome is Outcome.CONFLICT, "another slot's step moved /cluster's version"
    now = slotmodel.read(zk.nodes)
    assert now is not None and now.map_version == 1 and now.histories[0] == moved
    assert slotmodel.history_of(zk, next(t for t in TOPICS if slot_of(t, 2) == 0)) == moved


def test_the_operator_begins_a_move_and_rolls_it_back_by_cas_firing_the_cluster_watch() -> None:
    zk = ZkModel(2.0)
    slotmodel.create(zk, ("g0", "g1"))
    w = zk.open_session("watcher", 0.0)
    zk.watch(w, slotmodel.CLUSTER_PATH)
    new, fired = slotmodel.operate(zk, 0, lambda h: begin_move(h, "g1"), 0.5)
    assert new is not None and new.state is SlotState.MOVING and (w, "/cluster") in fired
    refused, fired = slotmodel.operate(zk, 0, lambda h: begin_move(h, "g1"), 0.6)
    assert refused is None and fired == [], "a move already runs: nothing is written"
    back, _ = slotmodel.operate(zk, 0, roll_back, 0.7)
    assert back == SlotHistory("g0")
