"""Group state as kept in ZooKeeper, and the election decision made from it.

``/groups/<g>/state`` holds the epoch, the primary, the ISR and the ``boot`` id
of every ISR member: a broker that restarts gets a new boot id and with it an
empty log, so it must not count as in sync until the primary re-admits it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Member:
    id: str
    url: str
    boot: str
    repl_url: str = ""  # where backups replicate from; empty: ``url``


@dataclass(frozen=True, slots=True)
class GroupState:
    epoch: int
    primary: str
    isr: tuple[str, ...]
    boots: Mapping[str, str]
    start_ts: int
    version: int = -1  # znode version this was read at; -1 before it exists

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "epoch": self.epoch,
                "primary": self.primary,
                "isr": list(self.isr),
                "boots": dict(self.boots),
                "start_ts": self.start_ts,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, version: int) -> GroupState:
        d: dict[str, Any] = json.loads(data)
        return cls(
            epoch=int(d["epoch"]),
            primary=str(d["primary"]),
            isr=tuple(d["isr"]),
            boots=dict(d["boots"]),
            start_ts=int(d["start_ts"]),
            version=version,
        )

    def in_sync(self, member: Member | None) -> bool:
        """Is this live member the same incarnation the ISR names?"""
        return (
            member is not None
            and member.id in self.isr
            and self.boots.get(member.id) == member.boot
        )


class Verdict(enum.Enum):
    CREATE = "create"  # no group yet: found it with us as primary
    CLAIM = "claim"  # the primary is gone (or is us, from before a lost session): CAS a new epoch
    FOLLOW = "follow"  # a live primary exists: follow it
    WAIT = "wait"  # nothing we may do now


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    state: GroupState | None = None  # the state to write (CREATE, CLAIM) or follow
    primary: Member | None = None  # who to follow
    reason: str = ""


def decide(
    me: Member,
    state: GroupState | None,
    members: Mapping[str, Member],
    last_ts: int,
    *,
    unclean_election: bool = False,
    suspect: Member | None = None,
) -> Decision:
    """What a broker that is not acting as primary should do, given the group state and the
    live members it sees.

    If the state still names this very incarnation as primary, the broker lost its
    ZooKeeper session (and stepped down) in between: it must not resume the old
    epoch, whose followers may have moved on, but claims a new one like anyone else.

    ``suspect`` is a primary incarnation this broker has seen die (its port refuses
    connections) before ZooKeeper noticed: it counts as gone, and stays out of the
    new ISR. Safety does not depend on the suspicion being right: the claim is a
    CAS, and an old primary that is alive after all can commit nothing more.
    """
    if suspect is not None:
        members = {m: v for m, v in members.items() if v != suspect}
    if state is None:
        new = GroupState(1, me.id, (me.id,), {me.id: me.boot}, last_ts + 1)
        return Decision(Verdict.CREATE, new, reason="no group state yet")
    primary = members.get(state.primary)
    primary_alive = primary is not None and state.boots.get(state.primary) == primary.boot
    if primary_alive and primary is not None and primary.id != me.id:
        return Decision(Verdict.FOLLOW, state, primary=primary)
    live_isr = [m for m in state.isr if state.in_sync(members.get(m))]
    if state.in_sync(me) and members.get(me.id) == me:
        isr = tuple(live_isr) if me.id in live_isr else (*live_isr, me.id)
        new = GroupState(
            state.epoch + 1,
            me.id,
            isr,
            {m: state.boots[m] for m in isr},
            last_ts + 1,
            state.version,
        )
        why = (
            f"we led epoch {state.epoch} before losing our session"
            if primary_alive
            else f"primary {state.primary} is gone"
        )
        return Decision(Verdict.CLAIM, new, reason=why)
    if live_isr:
        return Decision(Verdict.WAIT, state, reason="an in-sync replica will take over")
    if unclean_election and members.get(me.id) == me:
        new = GroupState(
            state.epoch + 1, me.id, (me.id,), {me.id: me.boot}, last_ts + 1, state.version
        )
        return Decision(Verdict.CLAIM, new, reason="unclean election: no in-sync replica is alive")
    return Decision(
        Verdict.WAIT,
        state,
        reason="no in-sync replica is alive and unclean_election is off",
    )
