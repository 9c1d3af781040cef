"""The slot map in the simulated ZooKeeper: ``/cluster`` and ``/slots/<n>`` as the real
cluster writes them (``coord/slots.py``), and the operator's steps on it.

The znodes hold the same JSON bytes: ``/cluster`` is ``{"slots": N, "version": V}`` and
``/slots/<n>`` a :class:`~tritonmq.core.slothistory.SlotHistory` encoded by its own
``encode``; every change is one transaction that checks the slot znode's version and
bumps ``/cluster``'s map version (checked too), as ``coord.slots._cas_one`` does. The
simulator creates the map before any broker starts (``tritonmq init``), and its operator
begins and rolls back moves by the same CAS (``tritonmq slots move`` / ``roll-back``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tritonmq.coord import paths
from tritonmq.core.slothistory import SlotHistory
from tritonmq.core.slots import SlotMap, slot_of
from tritonmq.errors import IllegalSlotTransition
from tritonmq.sim.params import CHROOT, under
from tritonmq.sim.zkmodel import Outcome, ZkModel, ZkMulti, ZkSet, Znode

CLUSTER_PATH = paths.cluster(CHROOT)
SLOTS_PREFIX = under(paths.slots(CHROOT))
SLOT_PATHS = (CLUSTER_PATH, SLOTS_PREFIX)  # what a reader of the map lists


def slot_path(n: int) -> str:
    return paths.slot(CHROOT, n)


def plan_owners(groups: Sequence[str], topics: Mapping[str, str]) -> tuple[str, ...]:
    """A slot map in which every topic of ``topics`` (topic -> its group) has a slot of its
    own owned by its group (so only a move changes who writes it); the smallest count from
    ``4 * len(groups)`` that gives every topic its own slot, the other slots dealt
    round-robin."""
    order = sorted(groups)
    count = max(4 * len(order), len(topics))
    while len({slot_of(t, count) for t in topics}) < len(topics):
        count += 1
    owners = [order[i % len(order)] for i in range(count)]
    for topic, group in topics.items():
        owners[slot_of(topic, count)] = group
    return tuple(owners)


def create(zk: ZkModel, owners: Sequence[str]) -> None:
    """Write a fresh map into the model, before any session exists (``tritonmq init``)."""
    zk.nodes[CLUSTER_PATH] = Znode(_cluster_json(len(owners), 0), 0, None)
    for n, g in enumerate(owners):
        zk.nodes[slot_path(n)] = Znode(SlotHistory(g).encode(), 0, None)


@dataclass(frozen=True, slots=True)
class SlotsRead:
    """The map as read, with the versions a CAS must name (``coord.slots.SlotHistories``)."""

    cluster_version: int
    map_version: int
    histories: tuple[SlotHistory, ...]
    znode_versions: tuple[int, ...]

    @property
    def smap(self) -> SlotMap:
        return SlotMap(tuple(h.owner for h in self.histories), self.map_version)

    def cas(self, n: int, new: SlotHistory) -> ZkMulti:
        """Write slot ``n`` if neither it nor ``/cluster`` changed since this read."""
        cluster = ZkSet(
            CLUSTER_PATH,
            _cluster_json(len(self.histories), self.map_version + 1),
            self.cluster_version,
        )
        return ZkMulti((ZkSet(slot_path(n), new.encode(), self.znode_versions[n]), cluster))


def read(nodes: Mapping[str, Znode]) -> SlotsRead | None:
    """The map in ``nodes`` (a listing under :data:`SLOT_PATHS`); None when there is none."""
    top = nodes.get(CLUSTER_PATH)
    if top is None:
        return None
    d = json.loads(top.data)
    histories, versions = [], []
    for n in range(int(d["slots"])):
        z = nodes.get(slot_path(n))
        if z is None:
            return None
        histories.append(SlotHistory.decode(z.data))
        versions.append(z.version)
    return SlotsRead(top.version, int(d.get("version", 0)), tuple(histories), tuple(versions))


def history_of(zk: ZkModel, topic: str) -> SlotHistory | None:
    """The topic's slot history as ZooKeeper holds it now (the checker's ground truth)."""
    r = read(zk.nodes)
    if r is None:
        return None
    return r.histories[slot_of(topic, len(r.histories))]


def operate(
    zk: ZkModel, n: int, step: Callable[[SlotHistory], SlotHistory], now: float
) -> tuple[SlotHistory | None, list[tuple[int, str]]]:
    """The operator's step on slot ``n`` over a session of its own, as the CLI does: the
    history written (None: the slot does not allow the step) and the watches it fires."""
    r = read(zk.nodes)
    assert r is not None
    try:
        new = step(r.histories[n])
    except IllegalSlotTransition:
        return None, []
    sid = zk.open_session("operator", now)
    result, fired = zk.apply(sid, r.cas(n, new))
    zk.close_session(sid)
    return (new if result.outcome is Outcome.OK else None), fired


def _cluster_json(slots: int, version: int) -> bytes:
    return json.dumps({"slots": slots, "version": version}).encode()
