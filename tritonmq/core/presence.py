"""Presence: who is subscribed to a topic right now, kept by the topic's primary.

A ``sub`` with ``presence`` makes that subscription (one ``(connection, sid)``) a
*member* of its topic: it is listed in the answer to ``presence`` with the id this
primary gives it (``client``), its connection's principal (``user``, the token's
subject; "" anonymous) and the ``info`` it chose; and it is told, by ``join`` and
``leave`` pushes, when another member comes or goes (``unsub``, a ``sub`` replacing
it, its connection closing). The member itself gets neither push about itself.

Presence is soft state, as in Centrifugo: it is not replicated and not stored. A
backup knows nobody; when it becomes primary, the reconnecting clients subscribe
again with their presence option and rebuild it, each arrival a ``join`` to those
already back. A deposed primary forgets it (its subscribers are told NOT_PRIMARY).

Bounds (``# --- presence`` in the config): at most ``max_presence_members`` members
per topic and ``max_presence_info_bytes`` UTF-8 bytes of ``info``; a ``sub`` past
either is refused whole with ``LIMIT``. The work one connection's changes cause is
bounded too (issue 26: re-sending a `sub` with presence on one sid, each a leave and a
join to every member, kept a primary from acknowledging anything for a minute):

* a ``sub`` that leaves its sid a member of the same topic with the same ``info`` changes
  nothing of presence (no leave, no join; the member keeps its ``client`` id);
* every ``join`` and ``leave`` push a connection's changes cause is spent from its budget,
  refilled at ``presence_pushes_per_s`` up to ``presence_burst``. A ``sub`` whose change
  would cost more than is left is refused whole with ``LIMIT``; leaves (``unsub``, a
  ``sub`` without presence) are never refused, but spend the budget all the same (it may
  go below zero), so alternating ``sub`` and ``unsub`` is held to the rate as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonmq.config import BrokerConfig
from tritonmq.core.actions import SendError, SendPresence
from tritonmq.wire.frames import ErrorCode, Join, Leave, Members, PresenceMember, Sub

Key = tuple[int, int]  # (id(conn), sid)
_UNSEEN = float("inf")  # a budget not refilled yet: it starts full at its first refill


@dataclass(frozen=True, slots=True)
class Attendee:
    """One member: where to push to, and what others see of it."""

    conn: Any
    sid: int
    topic: str
    member: PresenceMember


class PresenceTable:
    """Members per topic, in the order they joined; ``prefix`` makes ``client`` ids unique
    across this broker's incarnations (a client keeps none across a failover anyway)."""

    def __init__(
        self,
        prefix: str,
        max_members: int,
        max_info_bytes: int,
        pushes_per_s: float = float("inf"),
        burst: int = 1 << 62,
    ) -> None:
        self.prefix = prefix
        self.max_members = max_members
        self.max_info_bytes = max_info_bytes
        self.pushes_per_s = pushes_per_s
        self.burst = burst
        self.budget: dict[int, tuple[float, float]] = {}  # id(conn) -> (pushes left, when)
        self.topics: dict[str, dict[Key, Attendee]] = {}
        self.by_key: dict[Key, Attendee] = {}
        self.by_conn: dict[int, set[int]] = {}  # id(conn) -> its sids that are members
        self._seq = 0

    @classmethod
    def of(cls, prefix: str, cfg: BrokerConfig) -> PresenceTable:
        return cls(
            prefix,
            cfg.max_presence_members,
            cfg.max_presence_info_bytes,
            cfg.presence_pushes_per_s,
            cfg.presence_burst,
        )

    def unchanged(self, conn: Any, frame: Sub) -> bool:
        """Whether ``frame`` leaves its sid the member it is (same topic, same ``info``)."""
        a = self.by_key.get((id(conn), frame.sid))
        return (
            frame.presence
            and a is not None
            and (a.topic, a.member.info)
            == (
                frame.topic,
                frame.info,
            )
        )

    def _left(self, conn: Any, now: float | None) -> float:
        """The pushes ``conn`` may still cause, refilled up to ``now``."""
        left, at = self.budget.get(id(conn), (float(self.burst), _UNSEEN))
        if at == _UNSEEN and now is not None:
            at = now
        if now is not None and now > at:
            left = min(float(self.burst), left + (now - at) * self.pushes_per_s)
            at = now
        self.budget[id(conn)] = (left, at)
        return left

    def _spend(self, conn: Any, pushes: int) -> None:
        if pushes:
            left, at = self.budget.get(id(conn), (float(self.burst), _UNSEEN))
            self.budget[id(conn)] = (left - pushes, at)

    def refusal(self, conn: Any, frame: Sub, now: float | None = None) -> SendError | None:
        """``LIMIT`` for a ``sub`` with presence past the caps or past its connection's
        budget of pushes, else None. A ``sub`` that replaces a member (same connection and
        sid, same topic) does not count twice."""
        if not frame.presence or self.unchanged(conn, frame):
            return None
        size = len(frame.info.encode())
        if size > self.max_info_bytes:
            why = (
                f"presence info of {size} bytes exceeds max_presence_info_bytes="
                f"{self.max_info_bytes}"
            )
            return SendError(conn, ErrorCode.LIMIT, why, sid=frame.sid)
        here = self.topics.get(frame.topic, {})
        if len(here) >= self.max_members and (id(conn), frame.sid) not in here:
            why = (
                f"topic {frame.topic[:60]!r} has {len(here)} members with presence, "
                f"max_presence_members={self.max_members}"
            )
            return SendError(conn, ErrorCode.LIMIT, why, sid=frame.sid)
        key = (id(conn), frame.sid)
        cost = len(here) - (key in here)  # a join to every other member
        old = self.by_key.get(key)
        if old is not None:  # and a leave to those of the topic it leaves
            cost += len(self.topics[old.topic]) - 1
        left = self._left(conn, now)
        if cost > left:
            why = (
                f"this connection's presence changes would cause {cost} join/leave pushes, "
                f"{max(0, int(left))} left: presence_pushes_per_s={self.pushes_per_s:g}, "
                f"presence_burst={self.burst}; retry later"
            )
            return SendError(conn, ErrorCode.LIMIT, why, sid=frame.sid)
        return None

    def join(self, conn: Any, sid: int, topic: str, user: str, info: str) -> list[SendPresence]:
        """Make ``(conn, sid)`` a member of ``topic``; a ``join`` to every other member."""
        self._seq += 1
        member = PresenceMember(f"{self.prefix}.{self._seq}", user, info)
        a = Attendee(conn, sid, topic, member)
        others = list(self.topics.get(topic, {}).values())
        self.topics.setdefault(topic, {})[(id(conn), sid)] = a
        self.by_key[(id(conn), sid)] = a
        self.by_conn.setdefault(id(conn), set()).add(sid)
        self._spend(conn, len(others))
        return [SendPresence(o.conn, Join(o.sid, topic, member)) for o in others]

    def leave(self, conn: Any, sid: int) -> list[SendPresence]:
        """``(conn, sid)`` is no member any more (if it was): a ``leave`` to the others."""
        key = (id(conn), sid)
        a = self.by_key.pop(key, None)
        if a is None:
            return []
        sids = self.by_conn[id(conn)]
        sids.discard(sid)
        if not sids:
            del self.by_conn[id(conn)]
        here = self.topics[a.topic]
        del here[key]
        if not here:
            del self.topics[a.topic]
        self._spend(conn, len(here))
        return [SendPresence(o.conn, Leave(o.sid, a.topic, a.member)) for o in here.values()]

    def drop_conn(self, conn: Any) -> list[SendPresence]:
        """Connection ``conn`` closed: each of its members leaves."""
        out: list[SendPresence] = []
        for sid in sorted(self.by_conn.get(id(conn), ())):
            # nothing more goes to the closed connection's own other members
            out.extend(a for a in self.leave(conn, sid) if a.conn is not conn)
        self.budget.pop(id(conn), None)
        return out

    def members(self, conn: Any, rid: int, topic: str) -> SendPresence:
        """The answer to ``presence``: every member of ``topic``, oldest first."""
        here = self.topics.get(topic, {})
        return SendPresence(conn, Members(rid, topic, tuple(a.member for a in here.values())))

    def clear(self) -> None:
        """We stopped being primary: the next one rebuilds presence from resubscriptions."""
        self.topics.clear()
        self.by_key.clear()
        self.by_conn.clear()
        self.budget.clear()
