"""Slot moves in a simulated run: the operator's steps and the checks only moves need.

The operator (a ``MOVE_SLOT`` fault) moves the slot of a producer-only topic ``gN.m``
to another group, or rolls back the move it finds running, by CAS on the model
(:func:`~tritonmq.sim.slotmodel.operate`). The invariants of moved slots that are not
checked on every acknowledgement (:meth:`~tritonmq.sim.invariants.History.pub_acked`)
are checked after healing: every move ended, and every record of a moved topic that a
group holds committed lies in one of that group's eras and is stored once, across
groups (a dedup answer from a handover names the old position, so it stores nothing).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from tritonmq.core.log import GroupLog
from tritonmq.core.slothistory import SlotHistory, SlotState, begin_move, roll_back
from tritonmq.core.slots import slot_of
from tritonmq.sim import slotmodel
from tritonmq.sim.invariants import History
from tritonmq.sim.zkmodel import ZkModel

MOVED_TOPIC = "m"  # each group's topic whose slot moves
# Its readers (topic, subscription, mode, late), as SimParams.subscribers: a durable
# broadcast and a durable shared subscription (two members) handed on by era (M5, M6), an
# unnamed reader sent on (M4), and two durable ones created late, at a time drawn over the
# publishing period, so often while a move runs (M5: created at the current era)
MOVED_READERS: tuple[tuple[str, str | None, str, bool], ...] = (
    (MOVED_TOPIC, "md", "broadcast", False),
    (MOVED_TOPIC, None, "broadcast", False),
    (MOVED_TOPIC, "ms", "shared", False),
    (MOVED_TOPIC, "ms", "shared", False),
    (MOVED_TOPIC, "ml", "broadcast", True),
    (MOVED_TOPIC, "mls", "shared", True),
)


def moved_readers(
    rng: random.Random, publish_until: float, topics: int = 1
) -> list[tuple[str, str | None, str, float]]:
    """The moved topics' readers of one group, each with the time it starts reading: the
    six of ``MOVED_READERS`` on ``m``, and on each further moved topic (``topics`` > 1)
    one durable broadcast subscription ``md`` from ``earliest``, reading from the start
    (the real-process run of M9's loss: one such subscription per topic)."""
    return [
        (t, sub, mode, rng.uniform(0.5, publish_until) if late else 0.0)
        for t, sub, mode, late in MOVED_READERS
    ] + [(t, "md", "broadcast", 0.0) for t in moved_topics(topics)[1:]]


def moved_topics(count: int) -> tuple[str, ...]:
    """The names of a group's ``count`` topics whose slots move: ``m``, ``m1``, ``m2``..."""
    return (MOVED_TOPIC, *(f"{MOVED_TOPIC}{i}" for i in range(1, count)))


def busy_topics(count: int) -> tuple[str, ...]:
    """The names of ``g0``'s extra producer-only topics (``SimParams.busy``)."""
    return tuple(f"b{i}" for i in range(count))


def create_map(zk: ZkModel, p: Any, history: History) -> int:
    """Create the map (``tritonmq init``) for ``p`` (SimParams): each topic's slot owned by
    its group; the checker reads the slot histories from it. The number of slots."""
    groups = [f"g{g}" for g in range(p.groups)]
    names = {*p.producers, *(t for t, _, _ in p.subscribers), *moved_topics(p.moved_topics)}
    topics = {f"{g}.{t}": g for g in groups for t in names}
    topics.update((f"g0.{t}", "g0") for t in busy_topics(p.busy))
    owners = slotmodel.plan_owners(groups, topics)
    slotmodel.create(zk, owners)
    history.slot_history = lambda topic: slotmodel.history_of(zk, topic)
    return len(owners)


def operator_step(
    zk: ZkModel, rng: random.Random, groups: Sequence[str], topic: str, now: float
) -> tuple[str, list[tuple[int, str]]]:
    """Move ``topic``'s slot to another group (chosen by ``rng``), or roll back the move
    running; what happened (for the trace) and the watches it fired."""
    r = slotmodel.read(zk.nodes)
    assert r is not None
    n = slot_of(topic, len(r.histories))
    h = r.histories[n]
    if h.state is SlotState.NORMAL:
        to = rng.choice([g for g in groups if g != h.owner])
        new, fired = slotmodel.operate(zk, n, lambda h: begin_move(h, to), now)
        what = f"move slot {n} ({topic}) from {h.owner} to {to}"
    else:
        new, fired = slotmodel.operate(zk, n, roll_back, now)
        what = f"roll back the move of slot {n} ({topic}) to {h.move and h.move.to}"
    return (what if new is not None else f"{what}: refused"), fired


def describe(h: SlotHistory) -> str:
    return h.encode().decode()


def check_after_healing(
    history: History,
    zk: ZkModel,
    producers: Mapping[str, str],
    committed: Mapping[str, tuple[GroupLog, int]],
) -> None:
    """Every move ended; every committed record of the moved topics (``producers``: each
    moved topic's producer -> its topic) in each group's primary (``committed``: group ->
    its log and commit point), retained or purged within the dedup window, lies in an era
    of that group and is stored at one position only."""
    if history.violations:
        return
    at: dict[bytes, tuple[str, int]] = {}
    for topic in sorted(set(producers.values())):
        h = slotmodel.history_of(zk, topic)
        if h is None:
            continue
        if h.state is not SlotState.NORMAL:
            history.violation(
                f"after healing, the move of {topic}'s slot never ended: {describe(h)}"
            )
            return
        for group, (log, commit) in sorted(committed.items()):
            t = log.topics.get(topic)
            held = [(rec[0], rec[1]) for rec in (t.records if t is not None else ())]
            held += [
                (ts, uuid)
                for pairs in log.purged_by_slot.values()
                for ts, uuid in pairs
                if producers.get(history.published_by.get(uuid, ("", 0))[0]) == topic
            ]
            for ts, uuid in sorted(held):
                if ts > commit:
                    continue
                if h.era_of(group, ts) is None:
                    history.violation(
                        f"{group} holds {topic}'s record ts {ts} outside its eras: {describe(h)}"
                    )
                    return
                first = at.setdefault(uuid, (group, ts))
                if first != (group, ts):
                    producer, seq = history.published_by.get(uuid, ("?", 0))
                    history.violation(
                        f"{producer}:{seq} of {topic} stored twice: {first[0]} ts {first[1]}"
                        f" and {group} ts {ts}"
                    )
                    return
