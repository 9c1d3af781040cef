"""The world's checks over brokers' memory: copies of an acknowledged record, what the
ISR holds, and after healing the groups' ISRs and the moved slots (the rules themselves
live in :mod:`tritonmq.sim.invariants` and :mod:`tritonmq.sim.slotops`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonmq.coord import paths
from tritonmq.core.group import GroupState
from tritonmq.core.log import GroupLog
from tritonmq.errors import SlotHistoryError
from tritonmq.sim import slotmodel, slotops
from tritonmq.sim.clients import SimProducer
from tritonmq.sim.corebroker import SimCoreBroker
from tritonmq.sim.network import Proc
from tritonmq.sim.node import PubAcked
from tritonmq.sim.params import CHROOT

if TYPE_CHECKING:
    from tritonmq.sim.world import World


def acked_copies(w: World, name: str, msg: PubAcked, to: str) -> None:
    """Count copies on every incarnation that ever held the record: one that
    acknowledged it and then crashed did hold it when the primary counted it. A
    record a moved slot's puback places in another era is counted in its group."""
    group = w.group_of[name]
    if msg.eras:
        h = slotmodel.history_of(w.zk, getattr(w.nodes[to], "topic", ""))
        if h is not None:
            of = {}
            for e in set(msg.eras):
                try:
                    of[e] = h.group_of_era(e)
                except SlotHistoryError:
                    return  # an era the slot never had: the producer's check reports it
            for g in sorted(set(of.values())):
                copies_in(
                    w, g, tuple(t for t, e in zip(msg.ts, msg.eras, strict=True) if of[e] == g)
                )
            return
    copies_in(w, group, msg.ts)


def copies_in(w: World, group: str, ts: tuple[int, ...]) -> None:
    # an incarnation (broker and boot) may have several logs: one back from its disk keeps
    # its boot (D3), and holds a record if any of its logs does; counted once
    logs: dict[str, list[GroupLog]] = {}
    for b, n in w.nodes.items():
        if (
            isinstance(n, SimCoreBroker)
            and n.group == group
            and w.net.procs.get(b) is not Proc.DOWN
        ):
            logs.setdefault(f"{b}/{n.me.boot}", []).append(n.log)
    for g, k, log in w.graveyard:
        if g == group:
            logs.setdefault(k, []).append(log)
    w.history.acknowledged_copies(group, ts, logs)


def check_group(w: World, group: str) -> None:
    st = w.zk.nodes.get(paths.state(CHROOT, group))
    state = st.data if st is not None and isinstance(st.data, GroupState) else None
    logs = {
        b: (n.me.boot, n.log)
        for b, n in w.nodes.items()
        if isinstance(n, SimCoreBroker) and n.group == group and w.net.procs.get(b) is not Proc.DOWN
    }
    w.history.check_isr_holds(group, state, logs)


def check_moves(w: World) -> None:
    """After healing: every move ended; committed records of the moved topics lie in
    their group's eras, each stored once (:func:`slotops.check_after_healing`)."""
    committed = {}
    for group in sorted(set(w.group_of.values())):
        st = w.zk.nodes.get(paths.state(CHROOT, group))
        node = w.nodes.get(st.data.primary) if st is not None else None
        if isinstance(node, SimCoreBroker) and node.core.primary is not None:
            committed[group] = (node.log, node.core.commit_ts)
    producers = {
        n: node.topic
        for n, node in w.nodes.items()
        if isinstance(node, SimProducer) and node.slot is not None
    }
    slotops.check_after_healing(w.history, w.zk, producers, committed)


def check_whole(w: World) -> None:
    for group in sorted(
        {w.group_of[n] for n, node in w.nodes.items() if isinstance(node, SimCoreBroker)}
    ):
        st = w.zk.nodes.get(paths.state(CHROOT, group))
        isr = st.data.isr if st is not None else ()
        w.history.check_group_whole(group, isr, w.group_brokers(group))
