"""Slot histories in a real ZooKeeper: a move step is a CAS that re-judges a lost race (M1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from tritonmq.coord.slots import apply_slot_step, cas_slot, init_cluster, read_slot_histories
from tritonmq.coord.zkclient import new_client
from tritonmq.core.slothistory import SlotHistory, SlotState, begin_move, complete, seal
from tritonmq.devtools.zkserver import ZooKeeperServer
from tritonmq.errors import CoordinationError, IllegalSlotTransition

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    client = new_client(zk_server.hostport)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def chroot(zk_server: ZooKeeperServer) -> str:
    root = f"/coord-slots-{uuid.uuid4().hex[:8]}"
    init_cluster(zk_server.hostport, root, ["g1", "g2", "g3"], 3)  # slots: g1, g2, g3
    return root


def test_a_move_runs_step_by_step_and_each_step_bumps_the_map_version(
    zk: KazooClient, chroot: str
) -> None:
    apply_slot_step(zk, chroot, 0, lambda h: begin_move(h, "g2"))
    apply_slot_step(zk, chroot, 0, lambda h: seal(h, "g1", 500))
    done = apply_slot_step(zk, chroot, 0, lambda h: complete(h, "g2"))
    read = read_slot_histories(zk, chroot)
    assert read is not None and read.map_version == 3
    assert read.slots[0] == done and (done.owner, done.era, done.writer) == ("g2", 1, "g2")


def test_a_step_that_lost_a_race_is_applied_again_to_what_won(zk: KazooClient, chroot: str) -> None:
    calls = []

    def begin_after_another_slot_moved(h: SlotHistory) -> SlotHistory:
        if not calls:  # between our read and our write, a move of slot 1 bumps /cluster
            other = read_slot_histories(zk, chroot)
            assert other is not None
            assert cas_slot(zk, chroot, 1, begin_move(other.slots[1], "g3"), other)
        calls.append(h)
        return begin_move(h, "g2")

    written = apply_slot_step(zk, chroot, 0, begin_after_another_slot_moved)
    assert len(calls) == 2 and written.state is SlotState.MOVING
    read = read_slot_histories(zk, chroot)
    assert read is not None and read.slots[0] == written and read.slots[1].state is SlotState.MOVING


def test_a_step_the_winner_made_illegal_is_refused_and_nothing_is_written(
    zk: KazooClient, chroot: str
) -> None:
    def race(h: SlotHistory) -> SlotHistory:
        now = read_slot_histories(zk, chroot)
        assert now is not None
        if now.slots[0].state is SlotState.NORMAL:  # an operator moves it to g3 first
            assert cas_slot(zk, chroot, 0, begin_move(now.slots[0], "g3"), now)
        return begin_move(h, "g2")

    with pytest.raises(IllegalSlotTransition):
        apply_slot_step(zk, chroot, 0, race)
    read = read_slot_histories(zk, chroot)
    assert read is not None and read.slots[0].move is not None and read.slots[0].move.to == "g3"
    with pytest.raises(CoordinationError, match="no slot 7"):
        apply_slot_step(zk, chroot, 7, lambda h: begin_move(h, "g2"))
