"""A slot's history: which group held it in which era, up to which ``ts`` (docs/replication.md, M1).

The value of ``/slots/<n>`` as frozen dataclasses, its JSON, its invariants and the
four move steps (:func:`begin_move`, :func:`seal`, :func:`complete`,
:func:`roll_back`). Pure: the caller reads the znode with its version, applies a
step, and writes the result back by CAS on that version; a step the state does not
allow raises :class:`~tritonmq.errors.IllegalSlotTransition` before anything is
written. A slot that never moved encodes exactly as before moves existed:
``{"group": g, "state": "normal"}``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tritonmq.errors import IllegalSlotTransition, SlotHistoryError


class SlotState(enum.Enum):
    NORMAL = "normal"  # the owner writes the slot's records
    MOVING = "moving"  # a move began: the owner writes no more, its seal point is pending
    SEALED = "sealed"  # the owner's era ends at ``move.until``; the new group may complete


@dataclass(frozen=True, slots=True)
class Era:
    """A finished era: ``group`` held the slot, its records are ``after < ts <= until``."""

    group: str
    era: int
    after: int
    until: int

    def holds(self, ts: int) -> bool:
        return self.after < ts <= self.until


@dataclass(frozen=True, slots=True)
class Move:
    """A move in progress to ``to``; ``until`` is the old era's seal point once sealed."""

    to: str
    until: int | None = None


@dataclass(frozen=True, slots=True)
class SlotHistory:
    """One slot: its owner in era ``era`` (the current one), the finished eras, a move."""

    owner: str
    era: int = 0
    history: tuple[Era, ...] = ()
    state: SlotState = SlotState.NORMAL
    move: Move | None = None

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def after(self) -> int:
        """The current era's records are the owner's ``ts > after``: its last seal of this
        slot (0 if it never held it before), since it writes nothing of it in between."""
        return _last_until(self.history, self.owner)

    @property
    def writer(self) -> str | None:
        """The one group that may write the slot's records now; None while a move runs."""
        return self.owner if self.state is SlotState.NORMAL else None

    @property
    def moved(self) -> bool:
        """Whether the slot ever changed hands or is changing them now."""
        return bool(self.history) or self.move is not None

    def group_of_era(self, era: int) -> str:
        if era == self.era:
            return self.owner
        if 0 <= era < self.era:
            return self.history[era].group
        raise SlotHistoryError(f"era {era} does not exist (the slot is at era {self.era})")

    def after_of(self, era: int) -> int:
        """Era ``era``'s records are its group's ``ts > after``."""
        return self.history[era].after if era < self.era else self.after

    def until_of(self, era: int) -> int | None:
        """Era ``era``'s seal point (None: the current era, not sealed)."""
        if era < self.era:
            return self.history[era].until
        move = self.move if self.state is SlotState.SEALED else None
        return move.until if move is not None else None

    def era_of(self, group: str, ts: int) -> int | None:
        """The era a record of this slot stored in ``group`` at ``ts`` was written in."""
        for e in self.history:
            if e.group == group and e.holds(ts):
                return e.era
        if group == self.owner and ts > self.after:
            return self.era
        return None

    def as_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"group": self.owner, "state": self.state.value}
        if self.era or self.history:
            d["era"] = self.era
            d["history"] = [
                {"group": e.group, "era": e.era, "after": e.after, "until": e.until}
                for e in self.history
            ]
        if self.move is not None:
            d["move"] = {"to": self.move.to, "until": self.move.until}
        return d

    def encode(self) -> bytes:
        return json.dumps(self.as_json()).encode()

    @classmethod
    def from_json(cls, d: object) -> SlotHistory:
        """Read a znode's JSON; a slot written before moves existed is era 0, no history."""
        if not isinstance(d, Mapping):
            raise SlotHistoryError(f"a slot is a JSON object, not {d!r}")
        try:
            state = SlotState(d.get("state", "normal"))
        except ValueError:
            raise SlotHistoryError(f"unknown slot state {d.get('state')!r}") from None
        history = tuple(_era_from(e) for e in _list(d.get("history", [])))
        move_d = d.get("move")
        move = None
        if move_d is not None:
            if not isinstance(move_d, Mapping):
                raise SlotHistoryError(f"a move is a JSON object, not {move_d!r}")
            until = move_d.get("until")
            move = Move(_str(move_d.get("to"), "move.to"), None if until is None else _int(until))
        era = _int(d.get("era", len(history)))
        return cls(_str(d.get("group"), "group"), era, history, state, move)

    @classmethod
    def decode(cls, raw: bytes) -> SlotHistory:
        try:
            d = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise SlotHistoryError(f"a slot znode is not JSON: {e}") from None
        return cls.from_json(d)


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A place in a slot's records (M3): everything up to ``ts`` of era ``era``, in the ts
    of the group that held that era. Orders as a pair; a slot that never moved has only
    era 0, where this is today's ``ts``."""

    era: int
    ts: int


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch a reader reads in one group: the slot's records ``after < ts <= until``
    (``until`` None: the era is still being written)."""

    group: str
    era: int
    after: int
    until: int | None

    def holds(self, ts: int) -> bool:
        return self.after < ts and (self.until is None or ts <= self.until)


def position_of(h: SlotHistory, group: str, ts: int) -> Position | None:
    """The position of the slot's record stored in ``group`` at ``ts``; None: not the slot's."""
    era = h.era_of(group, ts)
    return None if era is None else Position(era, ts)


def segments_from(h: SlotHistory, pos: Position) -> tuple[Segment, ...]:
    """What a reader holding everything up to ``pos`` still has to read, in order: the rest
    of ``pos``'s era in its group, then every later era whole, in the group that held it
    (M4; the Spark source plans its ranges from the same list, M3)."""
    if not 0 <= pos.era <= h.era:
        raise SlotHistoryError(f"position {pos} names an era the slot never had (at {h.era})")
    out = []
    for era in range(pos.era, h.era + 1):
        until: int | None
        if era < h.era:
            e = h.history[era]
            group, after, until = e.group, e.after, e.until
        else:
            group, after = h.owner, h.after
            until = h.move.until if h.move is not None else None
        if era == pos.era:
            after = max(after, pos.ts) if until is None else min(max(after, pos.ts), until)
        out.append(Segment(group, era, after, until))
    return tuple(out)


def begin_move(h: SlotHistory, to: str) -> SlotHistory:
    """The operator starts moving the slot to group ``to`` (M2.1)."""
    if h.state is not SlotState.NORMAL:
        raise IllegalSlotTransition(f"a move to {h.move and h.move.to} is already {h.state.value}")
    if not to or to == h.owner:
        raise IllegalSlotTransition(f"cannot move a slot of {h.owner} to {to!r}")
    return replace(h, state=SlotState.MOVING, move=Move(to))


def seal(h: SlotHistory, by: str, until: int) -> SlotHistory:
    """The old group's primary (``by``) seals its era at ``until``, committed (M2.2)."""
    if h.state is not SlotState.MOVING or h.move is None:
        raise IllegalSlotTransition(f"only a moving slot is sealed; this one is {h.state.value}")
    if by != h.owner:
        raise IllegalSlotTransition(f"only the owner {h.owner} seals the slot, not {by}")
    if until < h.after:
        raise IllegalSlotTransition(f"seal point {until} is below the era's start {h.after}")
    return replace(h, state=SlotState.SEALED, move=Move(h.move.to, until))


def complete(h: SlotHistory, by: str) -> SlotHistory:
    """The new group's primary (``by``), holding the handed-over dedup state, takes the
    slot: the old era joins the history, the next era is ``by``'s (M2.4)."""
    if h.state is not SlotState.SEALED or h.move is None or h.move.until is None:
        raise IllegalSlotTransition(f"only a sealed slot is completed; this one is {h.state.value}")
    if by != h.move.to:
        raise IllegalSlotTransition(f"the slot moves to {h.move.to}; {by} cannot complete it")
    ended = Era(h.owner, h.era, h.after, h.move.until)
    return SlotHistory(h.move.to, h.era + 1, (*h.history, ended))


def roll_back(h: SlotHistory) -> SlotHistory:
    """Abandon a move before it completed: the owner writes again, in the same era (M7)."""
    if h.state is SlotState.NORMAL:
        raise IllegalSlotTransition("no move to roll back")
    return SlotHistory(h.owner, h.era, h.history)


# --- reading and checking -------------------------------------------------------------


def _last_until(history: tuple[Era, ...], group: str) -> int:
    for e in reversed(history):
        if e.group == group:
            return e.until
    return 0


def _validate(h: SlotHistory) -> None:
    """M1's invariants; a SlotHistoryError names the first one broken."""
    if not isinstance(h.owner, str) or not h.owner:
        raise SlotHistoryError("a slot needs an owner group")
    if h.era != len(h.history):
        raise SlotHistoryError(f"era {h.era} but {len(h.history)} finished eras")
    last: dict[str, int] = {}
    for i, e in enumerate(h.history):
        if e.era != i:
            raise SlotHistoryError(f"history entry {i} says era {e.era}")
        if i and h.history[i - 1].group == e.group:
            raise SlotHistoryError(f"eras {i - 1} and {i} are both {e.group}'s")
        if e.after != last.get(e.group, 0) or e.until < e.after:
            raise SlotHistoryError(f"era {i} of {e.group}: ({e.after}, {e.until}] out of order")
        last[e.group] = e.until
    if h.history and h.history[-1].group == h.owner:
        raise SlotHistoryError(f"the owner {h.owner} also held the era before")
    if (h.state is SlotState.NORMAL) != (h.move is None):
        raise SlotHistoryError(f"state {h.state.value} with move {h.move}")
    if h.move is not None:
        if h.move.to == h.owner or not h.move.to:
            raise SlotHistoryError(f"a move of {h.owner}'s slot to {h.move.to!r}")
        if (h.state is SlotState.SEALED) != (h.move.until is not None):
            raise SlotHistoryError(f"state {h.state.value} with seal point {h.move.until}")
        if h.move.until is not None and h.move.until < h.after:
            raise SlotHistoryError(f"seal point {h.move.until} below the era's start {h.after}")


def _era_from(d: object) -> Era:
    if not isinstance(d, Mapping):
        raise SlotHistoryError(f"a history entry is a JSON object, not {d!r}")
    return Era(
        _str(d.get("group"), "history group"),
        _int(d.get("era")),
        _int(d.get("after")),
        _int(d.get("until")),
    )


def _list(v: object) -> list[object]:
    if not isinstance(v, list):
        raise SlotHistoryError(f"a slot's history is a list, not {v!r}")
    return v


def _str(v: object, what: str) -> str:
    if not isinstance(v, str) or not v:
        raise SlotHistoryError(f"{what} must be a group name, not {v!r}")
    return v


def _int(v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SlotHistoryError(f"expected a ts or era (an int >= 0), not {v!r}")
    return v
