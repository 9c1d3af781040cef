"""Caps and names: what one connection or one group may create, decided in the core.

* **Names.** A topic or subscription name becomes one ZooKeeper path segment
  (``/subscriptions/<topic>/<name>``, ``/offsets/...``) and a key in every replica's
  maps. Names outside the rule of tritonmq/wire/names.py (what ZooKeeper cannot store as
  it is: ``.``, ``..``, ``/``; control characters; over ``max_name_len`` characters; and
  for topics ``*`` or ``>``, a pattern) are refused with ``BAD_REQUEST`` naming the rule.
* **Subscriptions per connection** (``max_subscriptions_per_conn``): each one is a
  consumer the commit path visits; past the cap a new ``sub`` gets ``LIMIT``.
* **Subscriptions per topic** (``max_subscriptions_per_topic``): every consumer of a topic
  is visited, and sent its own frame, on each commit of that topic, so a publish costs
  in proportion to them (issue 26); past the cap a new ``sub`` of it gets ``LIMIT``.
* **Topics per group** (``max_topics``): a topic costs memory on every replica
  while it holds records or has a subscriber (empty, unsubscribed topics are freed);
  a ``pub`` or ``sub`` that would create one more than the cap gets ``LIMIT``.
* **A producer's share of the dedup table** (``dedup_max_per_producer``, R7 in
  docs/replication.md): :class:`DedupShares`. Durable subscriptions per principal are
  capped where their owners are known (:class:`~tritonmq.core.auth.ClientAuth`).

Connections per broker are counted and refused by the shell (they are sockets).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonmq.config import BrokerConfig
from tritonmq.core.actions import SendError
from tritonmq.core.delivery import Delivery
from tritonmq.core.log import GroupLog
from tritonmq.wire.frames import (
    ClientFrame,
    Commit,
    ErrorCode,
    Fetch,
    Pub,
    Sub,
    SubDelete,
    SubReset,
)
from tritonmq.wire.names import name_problem

if TYPE_CHECKING:
    from tritonmq.core.replication import PrimaryCore


@dataclass(frozen=True, slots=True)
class Caps:
    max_subscriptions_per_conn: int
    max_topics: int
    max_name_len: int
    max_subscriptions_per_topic: int = 1_000

    @classmethod
    def of(cls, cfg: BrokerConfig) -> Caps:
        return cls(
            cfg.max_subscriptions_per_conn,
            cfg.max_topics,
            cfg.max_name_len,
            cfg.max_subscriptions_per_topic,
        )


def check_names(conn: Any, frame: ClientFrame, caps: Caps) -> SendError | None:
    """A ``BAD_REQUEST`` for a frame naming a topic or subscription that is not valid
    (admin ops included: a name that cannot be stored names nothing to delete or reset)."""
    match frame:
        case Pub() | Fetch():
            problem = name_problem("topic", frame.topic, caps.max_name_len)
            return _bad(conn, problem, id=frame.id)
        case Commit() | SubDelete() | SubReset():
            problem = name_problem("topic", frame.topic, caps.max_name_len) or name_problem(
                "subscription", frame.subscription, caps.max_name_len
            )
            return _bad(conn, problem, id=frame.id)
        case Sub():
            problem = name_problem("topic", frame.topic, caps.max_name_len)
            if problem is None and frame.subscription is not None:
                problem = name_problem("subscription", frame.subscription, caps.max_name_len)
            return _bad(conn, problem, sid=frame.sid)
        case _:
            return None


def _bad(
    conn: Any, problem: str | None, *, id: int | None = None, sid: int | None = None
) -> SendError | None:
    if problem is None:
        return None
    return SendError(conn, ErrorCode.BAD_REQUEST, problem, id, sid)


def check_pub(log: GroupLog, group: str, conn: Any, frame: Pub, caps: Caps) -> SendError | None:
    """``LIMIT`` for a ``pub`` that would create a topic past ``max_topics``."""
    why = _topic_refusal(log, group, frame.topic, caps)
    return None if why is None else SendError(conn, ErrorCode.LIMIT, why, id=frame.id)


def check_sub(
    delivery: Delivery, group: str, conn: Any, frame: Sub, caps: Caps
) -> SendError | None:
    """``LIMIT`` for a ``sub`` past ``max_subscriptions_per_conn`` on its connection or
    ``max_subscriptions_per_topic`` on its topic (a ``sub`` that replaces its own ``sid``
    is not a new one) or creating a topic past ``max_topics``."""
    why = None
    if (id(conn), frame.sid) not in delivery.consumers:
        n = delivery.subscriptions_of(conn)
        if n >= caps.max_subscriptions_per_conn:
            why = (
                f"this connection has {n} subscriptions, max_subscriptions_per_conn="
                f"{caps.max_subscriptions_per_conn}; unsubscribe one first"
            )
        elif (k := len(delivery.by_topic.get(frame.topic, ()))) >= caps.max_subscriptions_per_topic:
            why = (
                f"topic {frame.topic[:60]!r} has {k} subscriptions, max_subscriptions_per_topic="
                f"{caps.max_subscriptions_per_topic}"
            )
    why = why or _topic_refusal(delivery.log, group, frame.topic, caps)
    return None if why is None else SendError(conn, ErrorCode.LIMIT, why, sid=frame.sid)


def _topic_refusal(log: GroupLog, group: str, topic: str, caps: Caps) -> str | None:
    if topic in log.topics or len(log.topics) < caps.max_topics:
        return None
    return (
        f"group {group} holds max_topics={caps.max_topics} topics; {topic[:60]!r} would be one"
        " more (a topic is freed once it has no records and no subscribers)"
    )


Producer = str | int
"""Who a share is counted for: a principal's name, or ``id(conn)`` for the anonymous
principal (which is everyone on a broker without ``auth_required``)."""


class DedupShares:
    """How many uuids of the dedup window each producer holds, and the refusal of a batch
    that would take one past ``max_per_producer`` (R7's share rule).

    A producer's records count from the moment this primary accepts them until the
    dedup window forgets their ``ts`` (retained or purged: once purged, each is a uuid
    of the table). Only new records count: a retry whose uuids the group remembers is
    answered with their ``ts`` whatever the producer holds. Kept by the primary of a
    term only (a new primary starts with nobody holding anything), one entry per
    accepted batch, in ``ts`` order, so forgetting is a pop from the left."""

    def __init__(self, max_per_producer: int) -> None:
        self.max = max_per_producer
        self.term: PrimaryCore | None = None
        self.held: dict[Producer, int] = {}
        self._batches: deque[tuple[int, Producer, int]] = deque()  # (last ts, who, records)

    def refusal(self, p: PrimaryCore, who: Producer, conn: Any, frame: Pub) -> SendError | None:
        """``FULL`` for a ``pub`` whose new records would take ``who`` past its share."""
        if self.term is not p:  # a new term: nothing of the last one is attributed
            self.term, self.held, self._batches = p, {}, deque()
        self._forget(p.forgotten)
        n = self.held.get(who, 0)
        if n + len(frame.records) <= self.max:
            return None
        known = p.log.uuids
        new = len({r[0] for r in frame.records if r[0] not in known})
        if not new or n + new <= self.max:
            return None
        why = (
            f"this producer holds {n} uuids of the dedup window, dedup_max_per_producer="
            f"{self.max}; retry once the window lets them go (others are not refused)"
        )
        return SendError(conn, ErrorCode.FULL, why, id=frame.id)

    def spent(self, who: Producer, records: int, last_ts: int) -> None:
        """``who`` had ``records`` new records accepted, the newest at ``last_ts``."""
        if records > 0:
            self.held[who] = self.held.get(who, 0) + records
            self._batches.append((last_ts, who, records))

    def _forget(self, upto: int) -> None:
        batches, held = self._batches, self.held
        while batches and batches[0][0] <= upto:
            _, who, n = batches.popleft()
            left = held[who] - n
            if left:
                held[who] = left
            else:
                del held[who]
