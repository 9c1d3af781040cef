"""Admin ops on durable subscriptions: ``subdel`` and ``subreset`` (the primary's side).

Like Kafka's ``kafka-consumer-groups``, each is a dry run unless ``execute`` is set: the
answer (``subinfo``) says what the subscription is and what would change. An op is
refused (``BAD_REQUEST``) while the subscription has connected consumers, as Kafka
refuses to reset an active group: their acknowledgements would move the offset right
back. Who may ask is decided in :mod:`tritonmq.core.auth` (the ``admin`` claim).

A reset moves the offset (everything up to it acknowledged) so that the next record
handed out is the first retained one (``earliest``), the first published after the reset
(``latest``), or the first with ts >= ``to``; the new offset reaches ZooKeeper with the
next coalesced offset write. A ``to`` whose records were purged is refused (``PURGED``)
rather than silently skipping them; one beyond the commit point + 1 is ``BAD_REQUEST``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tritonmq.core.actions import Action, DeleteSubscription, SendError, SendSubInfo
from tritonmq.core.auth import ClientAuth
from tritonmq.core.delivery import Delivery
from tritonmq.core.log import GroupLog
from tritonmq.wire.frames import ErrorCode, From, SubDelete, SubInfo, SubReset


def administer(
    delivery: Delivery,
    auth: ClientAuth,
    log: GroupLog,
    conn: Any,
    frame: SubDelete | SubReset,
    commit_ts: int,
    ready: bool,
) -> list[Action]:
    """Answer an admin op; carry it out when ``frame.execute`` and nothing refuses it.
    ``ready``: the subscriptions (a new primary's) are loaded from ZooKeeper."""
    if not ready:
        msg = "the new primary is still loading subscriptions; retry"
        return [SendError(conn, ErrorCode.UNAVAILABLE, msg, id=frame.id)]
    key = (frame.topic, frame.subscription)
    d = delivery.durables.get(key)
    if d is None:
        msg = f"no durable subscription {frame.subscription!r} of topic {frame.topic!r}"
        return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
    if d.stored is None:
        msg = f"subscription {frame.subscription!r} is still being registered; retry"
        return [SendError(conn, ErrorCode.UNAVAILABLE, msg, id=frame.id)]
    action = "delete" if isinstance(frame, SubDelete) else "reset"
    to: int | None = None
    if isinstance(frame, SubReset):
        t = log.topics.get(frame.topic)
        purged = t.last_purged if t is not None else 0
        if frame.to == From.EARLIEST:
            to = purged
        elif frame.to == From.LATEST:
            to = commit_ts
        else:
            to = max(0, int(frame.to) - 1)
            if to > commit_ts:
                msg = f"'to' {frame.to} is beyond the commit point {commit_ts} + 1"
                return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
            if to < purged:
                msg = (
                    f"records of {frame.topic!r} up to ts {purged} were purged; "
                    f"reset to 'earliest' to start at the first retained one"
                )
                return [
                    SendError(conn, ErrorCode.PURGED, msg, id=frame.id, first=to + 1, last=purged)
                ]
    info = SubInfo(
        frame.id,
        frame.topic,
        frame.subscription,
        str(d.mode),
        auth.owner_of(*key),
        d.offset,
        len(d.consumers),
        action,
        to,
    )
    if not frame.execute:
        return [SendSubInfo(conn, info)]
    if d.consumers:
        msg = (
            f"subscription {frame.subscription!r} has {len(d.consumers)} connected "
            f"consumer(s); stop them before a {action}"
        )
        return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
    done = dataclasses.replace(info, executed=True)
    if isinstance(frame, SubDelete):
        del delivery.durables[key]
        auth.forget(*key)
        return [DeleteSubscription(*key), SendSubInfo(conn, done)]
    assert to is not None
    d.offset = to
    d.cursor = to + 1
    d.inflight.clear()
    d.redeliver.clear()
    d.ahead.clear()
    return [SendSubInfo(conn, done)]
