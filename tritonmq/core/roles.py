"""The broker core's own records: its role, the CAS it has in flight, the link it follows.

Kept apart from :mod:`tritonmq.core.broker`, which holds the rules that change them.
"""

from __future__ import annotations

import dataclasses
import enum

from tritonmq.core.actions import Action, LogLine, SendError
from tritonmq.core.actions import Level as L
from tritonmq.core.events import ClientFrameIn
from tritonmq.core.group import GroupState, Member
from tritonmq.wire.frames import Commit, ErrorCode, Sub


class Role(enum.Enum):
    JOINING = "joining"  # no decision yet, or waiting (no live in-sync replica, not registered)
    FOLLOWING = "following"
    CLAIMING = "claiming"  # our CAS for a new epoch (or the group's creation) is in flight
    LEADING = "leading"
    STEPPING_DOWN = "stepping down"  # planned stop: writing the last offsets
    STOPPED = "stopped"


class RoleGate:
    """The core's role, changed only through :meth:`set`, which notes every change
    from -> to and why; the core returns the notes with the event's actions."""

    def __init__(self) -> None:
        self.role = Role.JOINING
        self.changes: list[Action] = []

    def set(self, role: Role, why: str) -> None:
        if role is not self.role:
            self.changes.append(LogLine(L.INFO, f"role {self.role.value} -> {role.value}: {why}"))
            self.role = role

    def take(self) -> list[Action]:
        out, self.changes = self.changes, []
        return out


class CasKind(enum.Enum):
    CLAIM = "claim"
    ISR = "isr"


@dataclasses.dataclass(slots=True)
class PendingCas:
    request: int
    kind: CasKind
    state: GroupState
    unknown: bool = False  # the answer was UNKNOWN: a re-read decides
    read: int = 0  # ... the re-read asked then (ReadState.request), not a view read before


@dataclasses.dataclass(slots=True)
class FollowLink:
    id: int
    primary: Member
    epoch: int
    refused: int = 0
    first_refused: float = 0.0


def refuse_waiting(
    w: ClientFrameIn, code: ErrorCode, message: str, primary: str | None = None
) -> SendError:
    """An error for a request that waited (a durable ``sub`` by its sid, a ``commit`` by id)."""
    f = w.frame
    if isinstance(f, Sub):
        return SendError(w.conn, code, message, sid=f.sid, primary=primary)
    assert isinstance(f, Commit)
    return SendError(w.conn, code, message, id=f.id, primary=primary)
