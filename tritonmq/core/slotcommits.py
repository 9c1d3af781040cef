"""What a ``commit`` acknowledges of a durable subscription whose slot moved
(docs/replication.md M5), part of BrokerCore's ``commit``.

A ``commit`` names a ``ts`` of the group it is sent to. A group's eras of a slot are
disjoint ranges of its own ``ts``, so that ``ts`` says which of them it reaches; every
group that held an era of the topic takes the ``commit`` (Spark's source sends one to
each, docs/spark.md). The subscription is acknowledged only where it is served: at the
group of its era, up to that era's seal point when the era has ended (everything of it
acknowledged, the group hands the subscription on and purges the sealed remainder, M6).
A group holding the subscription at another group's era (pending at the owner, or handed
on and not let go yet), or not at all after its era ended, changes nothing, and never
registers it: only the owner creates a subscription, at its current era, once it read
what ZooKeeper holds, and not while the slot moves away from it (the retriable
``UNAVAILABLE``: the new owner may never learn of one created at the era that ends). A
pending one takes the query's commits once its offset reached the owner's era (the
source commits every batch).
"""

from __future__ import annotations

from typing import Any

from tritonmq.core.actions import SendError
from tritonmq.core.consumers import Durable
from tritonmq.core.moves import SlotMoves
from tritonmq.core.readers import moving_away
from tritonmq.wire.frames import Commit


def acknowledged(moves: SlotMoves, topic: str, d: Durable | None, ts: int) -> int | None:
    """The offset to acknowledge ``d`` (of ``topic``) up to for a ``commit`` of our ``ts``,
    or None: nothing here to acknowledge. A slot that never moved: ``ts`` itself."""
    found = moves.history_of(topic)
    if found is None:
        return ts
    h = found[1]
    if d is None:
        return ts if h.owner == moves.group else None  # the owner registers it, as before
    if d.pending or d.era > h.era or h.group_of_era(d.era) != moves.group:
        # stored at an older era (the owner holds all of its era for it until the stored
        # era's group hands it on, M5), or handed on to another group's era: not ours yet
        return None
    if d.era < h.era:
        return min(ts, h.history[d.era].until)  # an ended era of ours, up to its seal
    return ts


def refused_while_moving(
    moves: SlotMoves, conn: Any, frame: Commit, d: Durable | None
) -> SendError | None:
    """A ``commit`` that would create its subscription (``d``: None, not held here) while
    the slot moves away from us is refused with the retriable ``UNAVAILABLE``
    (:func:`~tritonmq.core.readers.moving_away`): it registers nothing at the era that
    ends. None: decide as usual."""
    found = moves.history_of(frame.topic)
    if d is not None or found is None:
        return None
    h = found[1]
    if h.owner != moves.group or h.move is None:
        return None
    return moving_away(conn, frame.topic, h, id=frame.id)


def load_first(
    moves: SlotMoves, asked: set[tuple[str, str]], topic: str, d: Durable | None, name: str
) -> bool:
    """Whether the owner must read the subscriptions ZooKeeper holds before it decides a
    ``commit`` of a moved slot's subscription it does not hold: it may be stored at an
    older era (pending here, M5), and registering it would take it for ours. ``asked``:
    the keys a load was asked for (shared with named ``sub``s); a second call after the
    load decides (a subscription still unknown is new: registered at the current era)."""
    if d is not None:
        return False
    found = moves.history_of(topic)
    if found is None or found[1].owner != moves.group:
        return False
    key = (topic, name)
    if key in asked:
        asked.discard(key)
        return False
    asked.add(key)
    return True
