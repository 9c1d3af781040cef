"""A model of ZooKeeper for the simulator: versioned znodes, sessions, ephemerals, watches.

It keeps only what the brokers' safety depends on: a write is a compare-and-set on
the znode version, an ephemeral node belongs to a session and goes when the session
expires (``session_timeout`` after its last heartbeat), and a watch says only *that*
something under a path changed (the watcher re-reads; the world delivers the
notification late and coalesces repeats). Whether a request reaches the server,
and whether its reply comes back (ConnectionLoss), is decided by the world: this
module applies what does arrive.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, TypeAlias


class SessionState(enum.Enum):
    """What a ZooKeeper client tells its owner (kazoo's listener states)."""

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


class Outcome(enum.Enum):
    OK = "ok"
    CONFLICT = "conflict"  # BadVersion, NodeExists or NoNode: the write did not happen
    UNKNOWN = "unknown"  # ConnectionLoss: the write may or may not have happened
    EXPIRED = "expired"  # SessionExpired: nothing happened, the session is gone


@dataclass(frozen=True, slots=True)
class Znode:
    data: Any
    version: int
    owner: int | None  # the session of an ephemeral node


@dataclass(frozen=True, slots=True)
class ZkGet:
    path: str


@dataclass(frozen=True, slots=True)
class ZkList:
    """Every znode whose path starts with ``prefix``: one consistent read of a subtree."""

    prefix: str


@dataclass(frozen=True, slots=True)
class ZkListMany:
    """Every znode under any of ``prefixes``: one consistent read of several subtrees (a
    broker's group with the slot map, as the real shell's view holds both)."""

    prefixes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ZkCreate:
    path: str
    data: Any
    ephemeral: bool = False
    # (path, version): made only while that znode is at that version, as a transaction
    # with a check (a primary's subscription writes, fenced by its group state)
    fence: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class ZkSet:
    path: str
    data: Any
    version: int = -1  # -1: unconditional
    fence: tuple[str, int] | None = None  # as ZkCreate's
    # an offset (mode, ts, era) of a moved slot's era: left out, answered OK, when the
    # znode holds a later era (the real shell reads it and sets by version, coord.offsets)
    era_ordered: bool = False


@dataclass(frozen=True, slots=True)
class ZkDelete:
    path: str


@dataclass(frozen=True, slots=True)
class ZkMulti:
    """A transaction of conditional sets, all or nothing (a slot step: the slot znode and
    ``/cluster``'s version bump, each checked against the version read)."""

    sets: tuple[ZkSet, ...]


ZkOp: TypeAlias = ZkGet | ZkList | ZkListMany | ZkCreate | ZkSet | ZkDelete | ZkMulti


@dataclass(frozen=True, slots=True)
class ZkResult:
    outcome: Outcome
    value: Any = None  # Znode (get, create, set), dict[str, Znode] (list), tuple (multi)


@dataclass(slots=True)
class Session:
    id: int
    owner: str
    last_heard: float
    alive: bool = True


class ZkModel:
    def __init__(self, session_timeout: float) -> None:
        self.session_timeout = session_timeout
        self.nodes: dict[str, Znode] = {}
        self.sessions: dict[int, Session] = {}
        self.watches: dict[int, set[str]] = {}  # session -> watched prefixes
        self._next_session = 1

    # --- sessions ------------------------------------------------------------------

    def open_session(self, owner: str, now: float) -> int:
        sid = self._next_session
        self._next_session += 1
        self.sessions[sid] = Session(sid, owner, now)
        return sid

    def heartbeat(self, sid: int, now: float) -> bool:
        """A ping reached the server; False if the session has already expired."""
        s = self.sessions.get(sid)
        if s is None or not s.alive:
            return False
        s.last_heard = now
        return True

    def alive(self, sid: int) -> bool:
        s = self.sessions.get(sid)
        return s is not None and s.alive

    def expire_due(self, now: float) -> list[tuple[int, str]]:
        """Expire sessions not heard from for ``session_timeout``; returns changed paths."""
        changed: list[tuple[int, str]] = []
        for s in self.sessions.values():
            if s.alive and now - s.last_heard >= self.session_timeout:
                changed.extend(self.close_session(s.id))
        return changed

    def close_session(self, sid: int) -> list[tuple[int, str]]:
        """End a session (expiry or a clean close): its ephemeral nodes go."""
        s = self.sessions.get(sid)
        if s is None or not s.alive:
            return []
        s.alive = False
        self.watches.pop(sid, None)
        gone = [p for p, n in self.nodes.items() if n.owner == sid]
        out: list[tuple[int, str]] = []
        for p in gone:
            del self.nodes[p]
            out.extend(self._fire(p))
        return out

    # --- watches ------------------------------------------------------------------

    def watch(self, sid: int, prefix: str) -> None:
        """Persistent recursive watch: notify ``sid`` of every change under ``prefix``."""
        if self.alive(sid):
            self.watches.setdefault(sid, set()).add(prefix)

    def _fire(self, path: str) -> list[tuple[int, str]]:
        return [
            (sid, prefix)
            for sid, prefixes in sorted(self.watches.items())
            for prefix in sorted(prefixes)
            if path.startswith(prefix)
        ]

    # --- operations ---------------------------------------------------------------

    def _at(self, fence: tuple[str, int] | None) -> bool:
        """No fence, or its znode is still at its version."""
        if fence is None:
            return True
        node = self.nodes.get(fence[0])
        return node is not None and node.version == fence[1]

    def apply(self, sid: int, op: ZkOp) -> tuple[ZkResult, list[tuple[int, str]]]:
        """Apply one request that reached the server: its result and the watches it fires."""
        if not self.alive(sid):
            return ZkResult(Outcome.EXPIRED), []
        match op:
            case ZkGet(path=path):
                node = self.nodes.get(path)
                if node is None:
                    return ZkResult(Outcome.CONFLICT), []
                return ZkResult(Outcome.OK, node), []
            case ZkList(prefix=prefix):
                found = {p: n for p, n in sorted(self.nodes.items()) if p.startswith(prefix)}
                return ZkResult(Outcome.OK, found), []
            case ZkListMany(prefixes=prefixes):
                found = {
                    p: n
                    for p, n in sorted(self.nodes.items())
                    if any(p.startswith(x) for x in prefixes)
                }
                return ZkResult(Outcome.OK, found), []
            case ZkCreate(fence=fence) | ZkSet(fence=fence) if not self._at(fence):
                return ZkResult(Outcome.CONFLICT), []  # fenced out: nothing written
            case ZkCreate(path=path, data=data, ephemeral=ephemeral):
                if path in self.nodes:
                    return ZkResult(Outcome.CONFLICT, self.nodes[path]), []
                node = Znode(data, 0, sid if ephemeral else None)
                self.nodes[path] = node
                return ZkResult(Outcome.OK, node), self._fire(path)
            case ZkSet(path=path, data=data, version=version, era_ordered=ordered):
                old = self.nodes.get(path)
                if old is None or (version != -1 and old.version != version):
                    return ZkResult(Outcome.CONFLICT, old), []
                if ordered and old.data[2] > data[2]:
                    return ZkResult(Outcome.OK, old), []  # it went on past our era
                node = Znode(data, old.version + 1, old.owner)
                self.nodes[path] = node
                return ZkResult(Outcome.OK, node), self._fire(path)
            case ZkMulti(sets=sets):
                for one in sets:
                    old = self.nodes.get(one.path)
                    if old is None or (one.version != -1 and old.version != one.version):
                        return ZkResult(Outcome.CONFLICT, old), []
                fired: list[tuple[int, str]] = []
                written = []
                for one in sets:
                    old = self.nodes[one.path]
                    node = Znode(one.data, old.version + 1, old.owner)
                    self.nodes[one.path] = node
                    written.append(node)
                    fired.extend(w for w in self._fire(one.path) if w not in fired)
                return ZkResult(Outcome.OK, tuple(written)), fired
            case ZkDelete(path=path):
                if self.nodes.pop(path, None) is None:
                    return ZkResult(Outcome.CONFLICT), []
                return ZkResult(Outcome.OK), self._fire(path)
        raise AssertionError(op)
