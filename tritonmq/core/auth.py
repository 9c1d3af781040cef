"""Who a client connection is, and what it may do: the core's authorization decisions.

The shell verifies a token's signature (crypto, with the configured key) and hands the
core the claims it read as a :class:`Principal`, or a :class:`TokenRejected`; from then
on every decision is taken here, from the principal the core keeps per connection and
the wall-clock time that comes with each frame:

* **Authentication.** With ``auth_required`` a connection is nobody until a ``hello``
  carries a valid token: every other frame gets ``UNAUTHENTICATED``. Without it a
  connection is :data:`ANONYMOUS` (may do everything) until a token names someone.
  A token whose ``exp`` has passed gets ``TOKEN_EXPIRED`` at ``hello`` and on every
  later request; a new ``hello`` on the same connection refreshes it (it must name the
  same principal), and ends the connection's subscriptions its claims no longer grant.
* **Claims.** ``pub`` and ``read`` are topic patterns (publish; subscribe and fetch),
  ``names`` subscription-name patterns; ``admin`` allows the admin ops (``subdel``,
  ``subreset``, ``slotmove``, and the read-only ``stats``). Patterns are :func:`fnmatch.fnmatchcase` patterns (``*`` matches any
  characters, dots included; case-sensitive); a missing claim allows nothing.
* **Ownership.** A durable subscription belongs to the principal that created it
  (kept in ZooKeeper with it; one created before owners existed belongs to the
  anonymous principal ""). Anyone else, admins included, gets ``FORBIDDEN`` for ``sub``
  (either mode) and ``commit``; ``ack``/``nack`` only reach a connection's own
  subscriptions. An admin may delete or reset it instead.
* **No jumps.** A ``sub`` naming an existing subscription may not start beyond the
  commit point + 1 (``BAD_REQUEST``): that would acknowledge records nobody has seen.
  A ``commit`` may not go past the commit point either (core/requests.py).
* **Durable subscriptions per principal.** A principal owns at most
  ``max_durable_per_principal`` of this group's (the anonymous principal counts as
  one); a ``sub`` or ``commit`` creating one more gets ``LIMIT``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

from tritonmq.core.actions import Action, RegisterSubscription, SendError
from tritonmq.wire.frames import (
    Ack,
    ClientFrame,
    Commit,
    ErrorCode,
    Fetch,
    From,
    Hello,
    Meta,
    Nack,
    Presence,
    Pub,
    SlotMove,
    Stats,
    Sub,
    SubDelete,
    SubReset,
    Unsub,
)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection is: ``name`` ("" is the anonymous principal) and its claims.
    ``exp``: seconds since the epoch after which its token is expired (None: never)."""

    name: str
    pub: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    admin: bool = False
    exp: float | None = None


@dataclass(frozen=True, slots=True)
class TokenRejected:
    """A token the shell could not verify (bad signature, malformed, wrong algorithm...)."""

    reason: str


ANONYMOUS = Principal("", pub=("*",), read=("*",), names=("*",), admin=True)
"""Everyone on a broker without ``auth_required``: may do everything (Kafka without an
authorizer does the same). Tokens are still honoured there, and name their owner."""


def allowed(patterns: Sequence[str], value: str) -> bool:
    return "*" in patterns or any(fnmatchcase(value, p) for p in patterns)


Origin = tuple[str, str, int]
"""(scheme, host, port) of a page's origin."""
Origins = frozenset[Origin]


def _origin_key(url: str) -> Origin | None:
    """(scheme, host, port) of a page's origin or of a broker's ws/wss URL, as an http(s)
    origin: a broker at ``ws://h:p`` serves its page from ``http://h:p``."""
    try:
        u = urlsplit(url.rstrip("/"))
        scheme = {"ws": "http", "wss": "https"}.get(u.scheme, u.scheme)
        if scheme not in ("http", "https") or not u.hostname:
            return None
        return scheme, u.hostname, u.port or (443 if scheme == "https" else 80)
    except ValueError:  # a port that is not a number
        return None


def broker_origins(urls: Iterable[str]) -> Origins:
    """The origins of pages the cluster's brokers serve (their client URLs)."""
    return frozenset(k for k in map(_origin_key, urls) if k is not None)


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARD = frozenset({"", "0.0.0.0", "::"})


def own_names(url: str, bound_host: str, advertise_host: str, hostname: str) -> frozenset[str]:
    """The host names a broker answers to, for the same-origin rule: its client URL's host
    and ``advertise_host``; the loopback names when it listens on loopback; its machine's
    ``hostname`` and the loopback names when it listens on every address."""
    names = {urlsplit(url).hostname or "", advertise_host, bound_host}
    if bound_host in _WILDCARD:
        names |= LOOPBACK_NAMES | {hostname}
    elif bound_host in LOOPBACK_NAMES or bound_host.startswith("127."):
        names |= LOOPBACK_NAMES
    return frozenset(n.lower() for n in names - _WILDCARD)


def origin_allowed(
    origin: str | None,
    host: str | None,
    allowed: Sequence[str],
    cluster: Origins = frozenset(),
    names: frozenset[str] | None = None,
) -> bool:
    """May a browser page from ``origin`` open a connection? No ``Origin`` header: not a
    browser, allowed. A page served by a broker of this cluster (``cluster``, from
    :func:`broker_origins`) is allowed: it connects to whichever broker is its topic's
    primary. ``*`` allows any; an empty list only the same origin (the Origin's
    host:port is the ``Host`` header) under one of the broker's own ``names``
    (:func:`own_names`; None: any): a page whose name an attacker rebound to the
    broker's address (DNS rebinding) sends a Host of that name; else the Origin must be
    listed."""
    if origin is None:
        return True
    if "*" in allowed:
        return True
    key = _origin_key(origin)
    if key is not None and key in cluster:
        return True
    if allowed:
        return origin.rstrip("/") in {a.rstrip("/") for a in allowed}
    if key is None or not host:
        return False
    if names is not None and key[1].lower() not in names:
        return False
    return key == _origin_key(f"{key[0]}://{host}")


class ClientAuth:
    """The principal of every client connection, and the owner of every durable
    subscription this primary knows; decides each client frame (see the module doc)."""

    def __init__(self, required: bool, max_durable: int = 1 << 62) -> None:
        self.required = required
        self.max_durable = max_durable  # durable subscriptions a principal may own
        self.principals: dict[int, Principal] = {}  # id(conn) -> who it is
        self.accepted: set[int] = set()  # id(conn) of connections admitted (see admitted())
        self.owners: dict[tuple[str, str], str] = {}  # (topic, name) -> principal name
        self.owned_by: dict[str, int] = {}  # principal name -> how many of owners it has

    # --- connections ----------------------------------------------------------------

    def principal(self, conn: Any) -> Principal | None:
        """Who ``conn`` is; None: nobody yet (a token is required and none was valid)."""
        p = self.principals.get(id(conn))
        if p is None and not self.required:
            return ANONYMOUS
        return p

    def producer(self, conn: Any) -> str | int:
        """Whom ``conn``'s records count for in shares of group-wide bounds: its principal,
        or the connection itself for the anonymous principal (``id(conn)``)."""
        p = self.principals.get(id(conn))
        return p.name if p is not None and p.name else id(conn)

    def admitted(self, conn: Any) -> bool:
        """Whether ``conn`` is admitted: a frame of it passed :meth:`check`, i.e. a ``hello``
        with a valid token when tokens are required, else a ``hello`` or any request served
        as the anonymous principal. The shell holds a connection to a deadline and a small
        message size until then (issue 26: docs/security.md, "Before hello")."""
        return id(conn) in self.accepted

    def drop(self, conn: Any) -> None:
        self.principals.pop(id(conn), None)
        self.accepted.discard(id(conn))

    def check(
        self,
        conn: Any,
        frame: ClientFrame,
        verified: Principal | TokenRejected | None,
        wall_ms: int,
    ) -> SendError | None:
        """The refusal of ``frame`` from ``conn``, or None when it may go on. A ``hello``
        carrying a token (``verified``: what the shell read from it) sets the principal."""
        refused = self._check(conn, frame, verified, wall_ms)
        if refused is None:
            self.accepted.add(id(conn))
        return refused

    def _check(
        self,
        conn: Any,
        frame: ClientFrame,
        verified: Principal | TokenRejected | None,
        wall_ms: int,
    ) -> SendError | None:
        now = wall_ms / 1000.0
        if isinstance(frame, Hello):
            return self._hello(conn, frame, verified, now)
        p = self.principal(conn)
        if p is None:
            return _refuse(conn, frame, ErrorCode.UNAUTHENTICATED, "send hello with a token first")
        if p.exp is not None and wall_ms and now >= p.exp:
            msg = f"the token of {p.name!r} expired; send hello with a fresh one"
            return _refuse(conn, frame, ErrorCode.TOKEN_EXPIRED, msg)
        match frame:
            case Pub(topic=topic):
                if not allowed(p.pub, topic):
                    return _forbidden(conn, frame, p, f"publish to {topic!r}")
            case Sub(topic=topic, subscription=name):
                if not allowed(p.read, topic):
                    return _forbidden(conn, frame, p, f"subscribe to {topic!r}")
                if name and not allowed(p.names, name):
                    return _forbidden(conn, frame, p, f"use subscription name {name!r}")
            case Fetch(topic=topic):
                if not allowed(p.read, topic):
                    return _forbidden(conn, frame, p, f"read {topic!r}")
            case Presence(topic=topic):
                if not allowed(p.read, topic):
                    return _forbidden(conn, frame, p, f"see who is subscribed to {topic!r}")
            case Commit(topic=topic, subscription=name):
                if not allowed(p.read, topic) or not allowed(p.names, name):
                    return _forbidden(conn, frame, p, f"commit {name!r} of {topic!r}")
            case SubDelete() | SubReset():
                if not p.admin:
                    return _forbidden(conn, frame, p, "administer subscriptions")
            case Stats():
                if not p.admin:
                    return _forbidden(conn, frame, p, "read the broker's stats")
            case SlotMove(slot=slot):
                if not p.admin:
                    return _forbidden(conn, frame, p, f"move slot {slot}")
            case Ack() | Nack() | Unsub() | Meta():
                pass  # a connection's own subscriptions; meta needs only a principal
        return None

    def _hello(
        self, conn: Any, frame: Hello, verified: Principal | TokenRejected | None, now: float
    ) -> SendError | None:
        if not frame.token:
            if self.principal(conn) is None:
                return SendError(conn, ErrorCode.UNAUTHENTICATED, "this broker requires a token")
            return None
        if verified is None:
            verified = TokenRejected("this broker has no key to verify tokens")
        if isinstance(verified, TokenRejected):
            return SendError(conn, ErrorCode.UNAUTHENTICATED, f"invalid token: {verified.reason}")
        if verified.exp is not None and now and now >= verified.exp:
            return SendError(
                conn, ErrorCode.TOKEN_EXPIRED, f"the token of {verified.name!r} expired"
            )
        old = self.principals.get(id(conn))
        if old is not None and old.name != verified.name:
            msg = f"this connection is {old.name!r}; a refreshed token must name the same principal"
            return SendError(conn, ErrorCode.UNAUTHENTICATED, msg)
        self.principals[id(conn)] = verified
        return None

    def no_longer_granted(
        self, conn: Any, subs: Iterable[tuple[int, str, str | None]]
    ) -> list[tuple[int, str]]:
        """Of ``conn``'s subscriptions ``(sid, topic, name)``, those its principal's claims no
        longer grant (a refresh narrowed them), each with the reason: they end."""
        p = self.principal(conn)
        out = []
        for sid, topic, name in subs:
            if p is None or not allowed(p.read, topic):
                why = f"subscribe to {topic!r}"
            elif name and not allowed(p.names, name):
                why = f"use subscription name {name!r}"
            else:
                continue
            who = repr(p.name) if p is not None and p.name else "the anonymous principal"
            out.append((sid, f"{who} may no longer {why} (the refreshed token): unsubscribed"))
        return out

    # --- durable subscriptions ----------------------------------------------------------

    def may_use(
        self,
        conn: Any,
        frame: Sub | Commit,
        durables: Mapping[tuple[str, str], object],
        commit_ts: int,
    ) -> SendError | None:
        """Ownership and the jump rule for a named ``sub`` or a ``commit``, decided where it
        is carried out (a new primary answers them once it has loaded the owners). A new
        subscription is recorded as ``conn``'s principal's."""
        name = frame.subscription
        if not name:
            return None
        p = self.principal(conn)
        if p is None:  # refused earlier by check(); kept for a replayed frame
            return _refuse(conn, frame, ErrorCode.UNAUTHENTICATED, "send hello with a token first")
        key = (frame.topic, name)
        if key not in durables:
            if self.owners.get(key) == p.name:  # claimed by an earlier request of its own
                return None
            n = self.owned_by.get(p.name, 0)
            if n >= self.max_durable:
                who = repr(p.name) if p.name else "the anonymous principal"
                msg = (
                    f"{who} owns {n} durable subscriptions here, max_durable_per_principal="
                    f"{self.max_durable}; delete one first"
                )
                return _refuse(conn, frame, ErrorCode.LIMIT, msg)
            self.forget(*key)  # a claim of someone else's that was not carried out
            self.owners[key] = p.name
            self.owned_by[p.name] = self.owned_by.get(p.name, 0) + 1
            return None
        if self.owners.get(key, "") != p.name:
            return self._taken(conn, frame, key)
        if isinstance(frame, Sub) and not frame.resume:
            start = frame.start
            if not isinstance(start, From) and start > commit_ts + 1:
                msg = (
                    f"'from' {start} is beyond the commit point {commit_ts} + 1 of existing "
                    f"subscription {name!r}: it would acknowledge records nobody received"
                )
                return _refuse(conn, frame, ErrorCode.BAD_REQUEST, msg)
        return None

    def _taken(self, conn: Any, frame: Sub | Commit, key: tuple[str, str]) -> SendError:
        owner = self.owners.get(key, "")
        who = repr(owner) if owner else "the anonymous principal"
        msg = f"subscription {key[1]!r} of {key[0]!r} belongs to {who}"
        return _refuse(conn, frame, ErrorCode.FORBIDDEN, msg)

    def loaded(self, owners: Mapping[tuple[str, str], str]) -> None:
        """A new primary read the subscriptions (and their owners) from ZooKeeper."""
        self.owners = dict(owners)
        self.owned_by = {}
        for owner in self.owners.values():
            self.owned_by[owner] = self.owned_by.get(owner, 0) + 1

    def forget(self, topic: str, name: str) -> None:
        owner = self.owners.pop((topic, name), None)
        if owner is not None:
            left = self.owned_by.get(owner, 0) - 1
            if left > 0:
                self.owned_by[owner] = left
            else:
                self.owned_by.pop(owner, None)

    def owner_of(self, topic: str, name: str) -> str:
        return self.owners.get((topic, name), "")

    def owned(self, actions: list[Action]) -> list[Action]:
        """Registrations carry their subscription's owner, to be kept in ZooKeeper."""
        if not any(type(a) is RegisterSubscription for a in actions):
            return actions
        return [
            dataclasses.replace(a, owner=self.owner_of(a.topic, a.name))
            if isinstance(a, RegisterSubscription)
            else a
            for a in actions
        ]


def _refuse(conn: Any, frame: ClientFrame, code: ErrorCode, message: str) -> SendError:
    """An error naming the request: ``sid`` for subscription frames, ``id`` for the rest."""
    if isinstance(frame, Sub | Ack | Nack | Unsub):
        return SendError(conn, code, message, sid=frame.sid)
    if isinstance(frame, Hello):
        return SendError(conn, code, message)
    return SendError(conn, code, message, id=frame.id)


def _forbidden(conn: Any, frame: ClientFrame, p: Principal, what: str) -> SendError:
    who = repr(p.name) if p.name else "the anonymous principal"
    return _refuse(conn, frame, ErrorCode.FORBIDDEN, f"{who} may not {what}")
