"""A client's one-shot requests to the primary, apart from the roles in :mod:`broker`:
``fetch`` (a ts range with its published times, or PURGED) and ``commit`` (acknowledge a
durable subscription without consuming it: Spark's source). Pure, like the rest of core."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tritonmq.core.actions import (
    Action,
    LoadSubscriptions,
    RegisterSubscription,
    SendCommitted,
    SendError,
    SendFetched,
)
from tritonmq.core.auth import ClientAuth
from tritonmq.core.consumers import Durable
from tritonmq.core.delivery import Delivery, check_retained
from tritonmq.core.log import GroupLog
from tritonmq.errors import Purged, RequestRejected
from tritonmq.wire.frames import Commit, ErrorCode, Fetch, Record

FETCH_BYTES = 4 * 1024 * 1024  # a fetch answer is cut here; `next` says where to continue


def refusal(
    conn: Any,
    e: RequestRejected,
    *,
    id: int | None = None,
    sid: int | None = None,
    message: str | None = None,
) -> SendError:
    """A refused request; PURGED says which records the reader missed."""
    first = last = None
    if isinstance(e, Purged):
        first, last = e.first, e.last
    msg = e.message if message is None else message
    return SendError(conn, ErrorCode(e.code), msg, id, sid, first=first, last=last)


def fetch(
    log: GroupLog,
    group: str,
    max_records: int,
    conn: Any,
    frame: Fetch,
    commit_ts: int,
    record_size: Callable[[Record], int] | None = None,
) -> Action:
    """Records of ``start..end`` (up to the commit point) with their published times.
    Purged records of the range are a PURGED error, or skipped with ``skip_purged`` (the
    answer then says the last purged ts): never skipped in silence. The answer holds at
    most FETCH_BYTES of records (but for a first one alone), as the log counts them and,
    given ``record_size``, as the connection's codec writes them."""
    end = min(frame.end, commit_ts)
    purged = None
    if frame.start <= end:
        try:
            check_retained(log, frame.topic, frame.start)
        except Purged as e:
            if not frame.skip_purged:
                return refusal(conn, e, id=frame.id, message=f"{e.message} in group {group}")
            purged = e.last
    limit = min(frame.max, max_records)
    t = log.topics.get(frame.topic)
    recs = t.between(frame.start, end, limit, FETCH_BYTES) if t is not None else []
    if record_size is not None:
        recs = recs[: _fitting(recs, record_size, FETCH_BYTES)]
    # Where to continue: after the last record sent, or past `end` if nothing was.
    next_ts = recs[-1][0] + 1 if recs else max(frame.start, end + 1)
    pub = log.published_between(recs[0][0], recs[-1][0]) if recs else []
    return SendFetched(conn, frame.id, recs, next_ts, tuple(pub), purged)


def _fitting(recs: Sequence[Record], size: Callable[[Record], int], budget: int) -> int:
    """How many of ``recs`` fit in ``budget`` bytes as ``size`` counts them (at least one):
    JSON writes a control byte in 6 (issue 26: 4 MiB of them made a 24 MiB ``fetched``)."""
    used = 0
    for n, r in enumerate(recs):
        used += size(r)
        if used > budget:
            return max(n, 1)
    return len(recs)


class Commits:
    """``commit``s on the primary. One whose subscription ZooKeeper does not hold yet is
    registered first and answered when SubscriptionRegistered says it is held: from then on
    the subscription keeps every later record, across failovers."""

    def __init__(
        self,
        delivery: Delivery,
        auth: ClientAuth | None = None,
        era_of: Callable[[str], int] | None = None,
        acknowledged: Callable[[str, Durable | None, int], int | None] | None = None,
    ) -> None:
        self.delivery = delivery
        self.auth = auth  # who may commit which subscription (None: anyone)
        self.era_of = era_of  # a moved slot's current era here (docs/replication.md M5)
        # what a commit of our ts acknowledges of a moved slot's subscription (None: nothing
        # here; core/slotcommits.py)
        self.acknowledged = acknowledged
        self.waiting: dict[tuple[str, str], list[tuple[Any, int]]] = {}  # (topic, name) -> asks

    def commit(self, conn: Any, frame: Commit, commit_ts: int) -> list[Action]:
        if self.auth is not None and (
            refused := self.auth.may_use(conn, frame, self.delivery.durables, commit_ts)
        ):
            return [refused]
        key = (frame.topic, frame.subscription)
        if refused := _jump(conn, frame, commit_ts, self.delivery.log.last_ts):
            if self.auth is not None and key not in self.delivery.durables:
                self.auth.forget(*key)  # a refused commit claims no name
            return [refused]
        ts = frame.ts
        if self.acknowledged is not None:
            here = self.acknowledged(frame.topic, self.delivery.durables.get(key), frame.ts)
            if here is None:  # served by another group's era, or let go: nothing to do here
                return [SendCommitted(conn, frame.id, min(frame.ts, commit_ts), commit_ts)]
            ts = here
        offset, register = self.delivery.commit(*key, ts, commit_ts)
        durable = self.delivery.durables[key]
        if register and self.era_of is not None and (era := self.era_of(frame.topic)):
            durable.era = durable.stored_era = era  # created at the current era (M5)
            register = [replace(r, era=era) for r in register]
        if durable.stored is not None:
            return [SendCommitted(conn, frame.id, offset, commit_ts)]
        asks = self.waiting.setdefault(key, [])
        asks.append((conn, frame.id))
        if not register and len(asks) == 1:  # a sub's registration, or an earlier one failed
            register = [RegisterSubscription(*key, str(durable.mode), durable.offset)]
        return list(register)

    def registered(self, topic: str, name: str, offset: int | None, commit_ts: int) -> list[Action]:
        """ZooKeeper holds (``offset``) or failed to hold (None) a subscription."""
        if offset is not None:
            self.delivery.registered(topic, name, offset)
        durable = self.delivery.durables.get((topic, name))
        out: list[Action] = []
        for conn, rid in self.waiting.pop((topic, name), []):
            if offset is None or durable is None:
                msg = f"registering subscription {name!r} of {topic!r} failed; retry"
                out.append(SendError(conn, ErrorCode.UNAVAILABLE, msg, id=rid))
            else:
                out.append(SendCommitted(conn, rid, durable.offset, commit_ts))
        return out

    def drop_conn(self, conn: Any) -> None:
        for asks in self.waiting.values():
            asks[:] = [a for a in asks if a[0] is not conn]

    def take_all(self) -> list[tuple[Any, int]]:
        """Every waiting ``commit`` (conn, id), forgotten: the primary steps down."""
        out = [a for asks in self.waiting.values() for a in asks]
        self.waiting.clear()
        return out


def _jump(conn: Any, frame: Commit, commit_ts: int, last_ts: int) -> SendError | None:
    """The no-jump rule for ``commit`` (as core/auth.py's for ``sub``): a ``ts`` past the
    commit point acknowledges records nobody could have read, and every later one up to it.
    Past what this group holds at all: ``BAD_REQUEST``. Held, not committed yet (a new
    primary's commit point catching up with what a reader read from its predecessor):
    ``UNAVAILABLE``, retry. It used to be clamped in silence: in anonymous mode
    ``ts = 2**53 - 1`` acknowledged another application's waiting records (issue 26)."""
    if frame.ts <= commit_ts:
        return None
    if frame.ts <= last_ts:
        msg = f"ts {frame.ts} is not committed yet (commit point {commit_ts}); retry"
        return SendError(conn, ErrorCode.UNAVAILABLE, msg, id=frame.id)
    msg = (
        f"ts {frame.ts} is beyond the commit point {commit_ts}: a commit acknowledges only "
        "records that could have been read"
    )
    return SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)


REGISTER_RETRY_S = 0.5  # a failed registration is asked again after this


class Registrations:
    """Durable subscriptions asked of ZooKeeper and not known to be there yet. A failed
    registration (ConnectionLoss, a session cut) is asked again until it lands: until then
    the subscription is durable only in this primary's memory, and a later primary, which
    loads subscriptions from ZooKeeper, would purge what it still needs (simulator, seed
    139 of ``--groups 3 --moves 6 --refusals --check-whole``)."""

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.asked: dict[tuple[str, str], tuple[RegisterSubscription, float | None]] = {}

    def issued(
        self, actions: list[Action], connected: bool = True, fence: int | None = None
    ) -> list[Action]:
        """Track the registrations among ``actions``, each fenced by the group state's
        version we hold (``fence``); without a connected ZooKeeper session they are kept
        back, asked once it is (see :meth:`due`)."""
        out: list[Action] = []
        for a in actions:
            if type(a) is RegisterSubscription:
                a = replace(a, fence=fence)
                self.asked[(a.topic, a.name)] = (a, None if connected else 0.0)
                if not connected:
                    continue  # due at the first connected tick
            out.append(a)
        return out

    def answered(self, topic: str, name: str, ok: bool, now: float) -> None:
        got = self.asked.get((topic, name))
        if ok:
            self.asked.pop((topic, name), None)
        elif got is not None:
            self.asked[(topic, name)] = (got[0], now + REGISTER_RETRY_S)

    def due(self, now: float, connected: bool = True, fence: int | None = None) -> list[Action]:
        """The failed registrations to ask again now (of subscriptions still unregistered).
        None while the session is not connected: a create asked then may reach ZooKeeper on
        the session the client opens once ours expired (kazoo fails the calls it queued at
        the expiry, not one made after its new session is up and before we hear LOST),
        after a new primary loaded the subscriptions: it never learns of this one and
        purges what it holds (simulator scenario
        ``test_no_registration_is_asked_while_the_session_is_not_connected``: ``durable``
        registered by a primary cut from ZooKeeper, on its new session, after its
        successor had loaded; the successor purged past it)."""
        out: list[Action] = []
        if not connected:
            return out
        for key, (a, at) in list(self.asked.items()):
            if at is None or now < at:
                continue
            d = self.delivery.durables.get(key)
            if d is None or d.stored is not None:
                del self.asked[key]
                continue
            a = replace(a, fence=fence)  # the state's version now (our own CAS moves it)
            self.asked[key] = (a, None)
            out.append(a)
        return out


class Loads:
    """Subscriptions loads asked of ZooKeeper, and which answers are fresh enough to take
    (docs/replication.md M9). Every load is a request of its own. One asked because
    something changed (an election, a slot's era become ours, a named ``sub`` or ``commit``
    that must see ZooKeeper as it is now) raises the floor: an answer to a load asked
    before it read ZooKeeper too early. With one number shared by every load, an answer
    read before the move completed released a waiting ``sub`` of the moved slot, which was
    then created afresh over a subscription the old group held, and an acknowledged run
    of the new era was purged for good. An answer older than one already taken is stale too."""

    def __init__(self) -> None:
        self.floor = 0  # the first request whose answer may be taken
        self.taken = 0  # the request of the last answer taken

    def ask(self, request: int, *, fresh: bool = True) -> LoadSubscriptions:
        """A load as request ``request``; ``fresh``: nothing read before it may be taken
        (a poll of pending subscriptions is not: any later read does)."""
        if fresh:
            self.floor = request
        return LoadSubscriptions(request)

    def take(self, request: int) -> bool:
        """Is the answer to ``request`` to be taken? (then it is the last one taken)."""
        if request < self.floor or request <= self.taken:
            return False
        self.taken = request
        return True
