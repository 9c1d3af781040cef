"""The ``slotmove`` admin op: an operator starts a slot move through any broker.

What `tritonmq slots move SLOT --to GROUP` does from the command line (a ``begin_move``
written to ``/slots/<n>`` by CAS, docs/replication.md M2.1), asked over the client
protocol so that the web console needs no ZooKeeper credential. Who may ask is decided in
:mod:`tritonmq.core.auth` (the ``admin`` claim). Here: whether the move may begin, judged
first on this broker's view of the slot map (so an obvious refusal costs ZooKeeper
nothing), then again by the shell's CAS on what ZooKeeper holds (the groups it lists and
the slot as it is now, :func:`begin_move_among`); and what the asker is told. The answer
comes once the move *began*: the two groups' primaries carry it on (seal, handover,
complete), and the slot map says when it is done.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from tritonmq.core.actions import Action, BeginSlotMove, SendError, SendSlotInfo
from tritonmq.core.events import CasOutcome, SlotMoveBegun
from tritonmq.core.slothistory import SlotHistory, begin_move
from tritonmq.core.slots import SlotMap
from tritonmq.errors import IllegalSlotTransition
from tritonmq.wire.frames import ErrorCode, SlotInfo, SlotMove


def begin_move_among(h: SlotHistory, to: str, groups: Collection[str]) -> SlotHistory:
    """:func:`~tritonmq.core.slothistory.begin_move`, to a group the cluster has (one that
    ever registered under ``/groups``, as `tritonmq slots move` checks)."""
    if to not in groups and to != h.owner:
        known = ", ".join(sorted(groups)) or "none"
        raise IllegalSlotTransition(f"no group {to!r} in the cluster (groups: {known})")
    return begin_move(h, to)


class SlotAdmin:
    """``slotmove`` requests waiting for their CAS, by request number."""

    def __init__(self) -> None:
        self.pending: dict[int, tuple[Any, SlotMove]] = {}
        self._requests = 0

    def ask(self, conn: Any, frame: SlotMove, slots: SlotMap | None) -> list[Action]:
        """Refuse what this broker's view already refuses; else have the shell write it.
        ``slots``: the slot map as this broker last read it (None: the cluster has none)."""
        if slots is None:
            msg = "this cluster has no slot map (tritonmq init writes one): no slot to move"
            return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
        if frame.slot >= slots.slots:
            msg = f"no slot {frame.slot}: the cluster has slots 0..{slots.slots - 1}"
            return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
        h = dict(slots.moved).get(frame.slot) or SlotHistory(slots.owners[frame.slot])
        try:
            begin_move(h, frame.to)
        except IllegalSlotTransition as e:
            msg = f"slot {frame.slot}: {e}"
            return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
        self._requests += 1
        self.pending[self._requests] = (conn, frame)
        return [BeginSlotMove(self._requests, frame.slot, frame.to)]

    def begun(self, ev: SlotMoveBegun) -> list[Action]:
        """The CAS's outcome, told to whoever asked (nobody, if it went away)."""
        asked = self.pending.pop(ev.request, None)
        if asked is None:
            return []
        conn, frame = asked
        h = ev.history
        if ev.outcome is CasOutcome.OK and h is not None and h.move is not None:
            info = SlotInfo(frame.id, frame.slot, h.owner, h.era, h.state.value, h.move.to)
            return [SendSlotInfo(conn, info)]
        if ev.outcome is CasOutcome.CONFLICT:
            msg = f"slot {frame.slot}: {ev.reason}"
            return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
        msg = (
            f"slot {frame.slot}: ZooKeeper failed while the move was written ({ev.reason}); "
            "it may have begun: read the slot map before asking again"
        )
        return [SendError(conn, ErrorCode.UNAVAILABLE, msg, id=frame.id)]

    def drop_conn(self, conn: Any) -> None:
        """``conn`` closed: its answers go nowhere (the moves themselves go on)."""
        self.pending = {r: a for r, a in self.pending.items() if a[0] is not conn}
