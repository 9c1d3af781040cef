"""A simulated broker's half of slot moves: what ``broker/moves.py`` does with kazoo and
websockets, done with the simulator's ZooKeeper and network models. It decides nothing.

* A :class:`~tritonmq.core.actions.ProposeSlotStep` is ``coord.slots.apply_slot_step``:
  read ``/cluster`` and the slots, apply ``seal`` / ``complete`` to the slot's history,
  write it by one transaction on both versions; a lost race reads and applies again (at
  most :data:`ATTEMPTS` times), a step the slot no longer allows is CONFLICT, a write of
  unknown outcome is judged by reading again; answered with ``SlotStepDone``.
* An :class:`~tritonmq.core.actions.AskHandover` reads the old group (its state and
  members), dials its primary's replication listener, then its other ISR members', sends
  ``handover`` and takes the first matching ``handed``; answered with ``HandoverAnswered``
  (pairs None when none of them answered).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritonmq.coord import paths
from tritonmq.core import events as ce
from tritonmq.core.actions import AskHandover, ProposeSlotStep, SlotStep
from tritonmq.core.group import GroupState, Member
from tritonmq.core.slothistory import SlotHistory, complete, seal
from tritonmq.errors import IllegalSlotTransition
from tritonmq.sim import slotmodel
from tritonmq.sim.network import Dial
from tritonmq.sim.node import CloseConn, DialOut, Effect, Send, ZkRequest
from tritonmq.sim.params import CHROOT, under
from tritonmq.sim.zkmodel import Outcome, ZkList, ZkListMany, ZkResult
from tritonmq.wire.frames import HandoverAsk, HandoverPairs

ATTEMPTS = 20  # apply_slot_step's lost races before it gives up
ZK_KINDS = ("slotread", "slotcas", "slotjudge", "horead")


@dataclass(slots=True)
class _Step:
    action: ProposeSlotStep
    attempts: int = 0
    read: slotmodel.SlotsRead | None = None
    new: SlotHistory | None = None


@dataclass(slots=True)
class _Ask:
    action: AskHandover
    candidates: list[str] = field(default_factory=list)
    next: int = 0  # the next candidate to dial
    dialing: str = ""  # the tag of the dial in flight
    conn: int | None = None


class MoveShell:
    def __init__(self, group: str, me: Member) -> None:
        self.group = group
        self.me = me
        self.steps: dict[int, _Step] = {}
        self.asks: dict[int, _Ask] = {}

    # --- actions ----------------------------------------------------------------------------

    def step(self, a: ProposeSlotStep, out: list[Effect]) -> None:
        self.steps[a.request] = _Step(a)
        out.append(ZkRequest(f"slotread:{a.request}", ZkListMany(slotmodel.SLOT_PATHS)))

    def ask(self, a: AskHandover, out: list[Effect]) -> None:
        self.asks[a.request] = _Ask(a)
        out.append(ZkRequest(f"horead:{a.request}", ZkList(under(paths.group(CHROOT, a.group)))))

    # --- ZooKeeper replies ------------------------------------------------------------------

    def zk(
        self, kind: str, req: int, result: ZkResult, now: float, out: list[Effect]
    ) -> ce.Event | None:
        """A reply to one of our requests; the event to feed the core, if any."""
        if kind == "horead":
            ask = self.asks.get(req)
            if ask is not None:
                if result.outcome is Outcome.OK:
                    ask.candidates = _order(result.value, ask.action.group)
                return self._next(req, ask, now, out)
            return None
        st = self.steps.get(req)
        if st is None:
            return None
        ok = result.outcome is Outcome.OK
        if kind == "slotread":
            if not ok:
                return self._done(req, ce.CasOutcome.UNKNOWN, None, now)
            r = slotmodel.read(result.value)
            if r is None:
                return self._done(req, ce.CasOutcome.UNKNOWN, None, now)
            a = st.action
            try:
                st.new = _apply(a, r.histories[a.slot], self.group)
            except IllegalSlotTransition:
                return self._done(req, ce.CasOutcome.CONFLICT, None, now)
            st.read = r
            out.append(ZkRequest(f"slotcas:{req}", r.cas(a.slot, st.new)))
        elif kind == "slotcas":
            if ok:
                return self._done(req, ce.CasOutcome.OK, st.new, now)
            if result.outcome is Outcome.CONFLICT:
                return self._again(req, st, now, out)
            out.append(ZkRequest(f"slotjudge:{req}", ZkListMany(slotmodel.SLOT_PATHS)))
        elif kind == "slotjudge":
            r = slotmodel.read(result.value) if ok else None
            if r is None or st.read is None:
                return self._done(req, ce.CasOutcome.UNKNOWN, None, now)
            if r.histories[st.action.slot] == st.new and r.map_version > st.read.map_version:
                return self._done(req, ce.CasOutcome.OK, st.new, now)
            return self._again(req, st, now, out)
        return None

    def _again(self, req: int, st: _Step, now: float, out: list[Effect]) -> ce.Event | None:
        st.attempts += 1
        if st.attempts >= ATTEMPTS:
            return self._done(req, ce.CasOutcome.UNKNOWN, None, now)
        out.append(ZkRequest(f"slotread:{req}", ZkListMany(slotmodel.SLOT_PATHS)))
        return None

    def _done(
        self, req: int, outcome: ce.CasOutcome, h: SlotHistory | None, now: float
    ) -> ce.Event:
        st = self.steps.pop(req)
        written = -1 if h is None or st.read is None else st.read.map_version + 1  # M1
        return ce.SlotStepDone(req, outcome, h, now, written)

    # --- the handover's connections ---------------------------------------------------------

    def _next(self, req: int, ask: _Ask, now: float, out: list[Effect]) -> ce.Event | None:
        if ask.next >= len(ask.candidates):
            del self.asks[req]
            return ce.HandoverAnswered(req, None, now)
        peer = ask.candidates[ask.next]
        ask.next += 1
        ask.dialing = f"ho:{req}:{ask.next}"
        out.append(DialOut(peer, "repl", ask.dialing))
        return None

    def dialed(
        self, tag: str, outcome: Dial, conn: int | None, now: float, out: list[Effect]
    ) -> ce.Event | None:
        """A dial tagged ``ho:...`` ended."""
        req = int(tag.split(":")[1])
        ask = self.asks.get(req)
        if ask is None or ask.dialing != tag:
            if conn is not None:
                out.append(CloseConn(conn))
            return None
        ask.dialing = ""
        if outcome is Dial.CONNECTED and conn is not None:
            ask.conn = conn
            a = ask.action
            out.append(
                Send(
                    conn,
                    HandoverAsk(
                        self.group,
                        self.me.id,
                        self.me.boot,
                        a.slot,
                        a.until,
                        after=a.after,
                        earlier=a.earlier,
                    ),
                )
            )
            return None
        return self._next(req, ask, now, out)

    def owns(self, conn: int) -> int | None:
        return next((r for r, ask in self.asks.items() if ask.conn == conn), None)

    def received(self, req: int, msg: Any, now: float, out: list[Effect]) -> ce.Event | None:
        ask = self.asks[req]
        assert ask.conn is not None
        out.append(CloseConn(ask.conn))  # one answer per connection: the asker closes it
        ask.conn = None
        a = ask.action
        if isinstance(msg, HandoverPairs) and (msg.slot, msg.until) == (a.slot, a.until):
            del self.asks[req]
            return ce.HandoverAnswered(req, msg, now)
        return self._next(req, ask, now, out)  # refused (an error frame): the next one

    def closed(self, req: int, now: float, out: list[Effect]) -> ce.Event | None:
        ask = self.asks[req]
        ask.conn = None
        return self._next(req, ask, now, out)


def _apply(a: ProposeSlotStep, h: SlotHistory, group: str) -> SlotHistory:
    if a.step is SlotStep.SEAL:
        assert a.until is not None
        return seal(h, group, a.until)
    return complete(h, group)


def _order(nodes: dict[str, Any], group: str) -> list[str]:
    """The old group's primary, then its other ISR members, those registered now
    (``broker/moves.group_repl_urls``)."""
    st = nodes.get(paths.state(CHROOT, group))
    if st is None or not isinstance(st.data, GroupState):
        return []
    state: GroupState = st.data
    prefix = under(paths.members(CHROOT, group))
    live = {p[len(prefix) :] for p in nodes if p.startswith(prefix)}
    order = [state.primary, *sorted(m for m in state.isr if m != state.primary)]
    return [m for m in order if m and m in live]
