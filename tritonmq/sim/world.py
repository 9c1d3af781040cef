"""The simulated world: one seed, simulated time, an event queue ordered by (time, seq).

Every process (broker or client) is a :class:`~tritonmq.sim.node.SimNode`; the world
delivers its events, performs its effects through the network and ZooKeeper models,
injects the faults the seed schedules, and checks the invariants after every step.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tritonmq.coord import paths
from tritonmq.core.group import GroupState
from tritonmq.core.log import GroupLog
from tritonmq.core.slots import slot_of
from tritonmq.sim import slotops, worldchecks
from tritonmq.sim.clients import SimProducer, SimSubscriber
from tritonmq.sim.corebroker import SimCoreBroker
from tritonmq.sim.disk import SimDisk
from tritonmq.sim.faults import Fault, FaultKind, moves_on, schedule_faults
from tritonmq.sim.invariants import History
from tritonmq.sim.network import ZK, Conn, Dial, Network, Proc
from tritonmq.sim.node import (
    TICK,
    Accepted,
    AcceptedWrites,
    Booted,
    CloseConn,
    Closed,
    Dialed,
    DialOut,
    Effect,
    Leads,
    NodeEvent,
    Note,
    PubAcked,
    PurgedUpto,
    Received,
    Send,
    SessionChanged,
    SimNode,
    Ticked,
    WatchFired,
    ZkReplied,
    ZkRequest,
    ZkWatch,
)
from tritonmq.sim.params import CHROOT, SimParams, under
from tritonmq.sim.trace import Trace, describe
from tritonmq.sim.zkmodel import (
    Outcome,
    SessionState,
    ZkCreate,
    ZkList,
    ZkModel,
    ZkMulti,
    ZkResult,
    ZkSet,
)

PING_TIMEOUT = 1.0  # a connection over a cut link, or to a frozen process, dies after this
OPEN_TIMEOUT = 0.5  # a dial that gets no answer
ZK_TIMEOUT = 0.4
CLIENT_TICK = 0.25  # a ZooKeeper request that gets no answer ends in ConnectionLoss
_GROUPS, _OFFSETS = under(paths.groups(CHROOT)), under(paths.offsets(CHROOT))


@dataclass(frozen=True, slots=True)
class _ToNode:
    node: str
    inc: int
    ev: NodeEvent


@dataclass(frozen=True, slots=True)
class _Arrive:
    conn: int
    to: str
    msg: Any


@dataclass(frozen=True, slots=True)
class _ZkArrive:
    node: str
    inc: int
    session: int
    req: ZkRequest
    lose_reply: bool


@dataclass(frozen=True, slots=True)
class _Heartbeat:
    node: str
    inc: int


@dataclass(frozen=True, slots=True)
class _PingCheck:
    conn: int


@dataclass(frozen=True, slots=True)
class _FaultEvent:
    fault: Fault


@dataclass(frozen=True, slots=True)
class _ServerTick:
    pass


@dataclass(frozen=True, slots=True)
class _Heal:
    pass


@dataclass(frozen=True, slots=True)
class _WatchDue:
    node: str
    inc: int
    prefix: str


@dataclass(frozen=True, slots=True)
class _TickDue:
    node: str
    inc: int


_Event = (
    _ToNode
    | _Arrive
    | _ZkArrive
    | _Heartbeat
    | _PingCheck
    | _FaultEvent
    | _ServerTick
    | _Heal
    | _WatchDue
    | _TickDue
)


@dataclass(slots=True)
class Result:
    seed: int
    steps: int
    faults: int
    violation: str | None
    digest: str
    trace: str
    shape: str = ""  # a swarm seed's drawn shape (sim/swarm.py), printed with the result


class World:
    def __init__(self, seed: int, params: SimParams | None = None) -> None:
        self.seed = seed
        self.p = params or SimParams()
        self.rng = random.Random(seed)
        self.broker = self.p.broker
        if self.p.offset_intervals is not None:
            interval = self.rng.uniform(*self.p.offset_intervals)
            self.broker = dataclasses.replace(self.broker, offset_interval=interval)
        self.now = 0.0
        self.queue: list[tuple[float, int, _Event]] = []
        self._seq = 0
        self.net = Network(self.rng)
        self.zk = ZkModel(self.p.broker.session_timeout)
        self.history = History(self.p.broker.min_insync)
        self.history.shared_grace = self.p.broker.grace
        self.trace = Trace()
        self.nodes: dict[str, SimNode] = {}
        self.factories: dict[str, Callable[[], SimNode]] = {}
        self.inc: dict[str, int] = {}
        self.held: dict[str, list[NodeEvent]] = {}  # events for a frozen process
        self.group_of: dict[str, str] = {}
        self.sessions: dict[str, int] = {}
        self.session_state: dict[str, SessionState] = {}
        self.last_zk_ok: dict[str, float] = {}
        self.session_note_at: dict[str, float] = {}
        self.pending_watches: set[tuple[str, int, str]] = set()  # (node, incarnation, prefix)
        self.loads_due: dict[str, float] = {}  # slow loads: a broker's last load's read
        self.zk_flaky: dict[str, int] = {}  # group -> CASes that will end in ConnectionLoss
        self.watch_delay = 0.05
        self.faults_done = 0
        self.dirty: set[str] = set()
        self.graveyard: list[tuple[str, str, GroupLog]] = []  # crashed incarnations' memory
        self.disks: dict[str, SimDisk] = {}  # broker -> its disk, across its restarts
        self.healed = False
        self.bound: dict[str, str] = {}  # scenario labels ("@backup:g0=Y") -> broker
        self.moving = moves_on(self.p)
        self._build()

    # --- setup -------------------------------------------------------------------------

    def _build(self) -> None:
        p = self.p
        moved = slotops.moved_topics(p.moved_topics) if self.moving else ()
        slots = slotops.create_map(self.zk, p, self.history) if self.moving else 0
        for g in range(p.groups):
            busy = slotops.busy_topics(p.busy) if g == 0 else ()
            producers = (*p.producers, *moved, *busy)
            group = f"g{g}"
            for r in range(p.replicas):
                name = f"{group}b{r}"
                self.group_of[name] = group
                self.factories[name] = self._broker_factory(name, group)
            for i, t in enumerate(producers):
                name = f"{group}p{i}"
                self.group_of[name] = group
                rng = random.Random(self.rng.getrandbits(64))
                topic = f"{group}.{t}"
                slot = slot_of(topic, slots) if t in moved else None
                prod = SimProducer(
                    name, group, topic, self.history, rng, publish_until=p.publish_until, slot=slot
                )
                self.factories[name] = lambda prod=prod: prod  # type: ignore[misc]
            readers = [(*r, 0.0) for r in p.subscribers]
            if self.moving:
                readers += slotops.moved_readers(self.rng, p.publish_until, p.moved_topics)
            for i, (t, sub, mode, start_at) in enumerate(readers):
                name = f"{group}s{i}"
                self.group_of[name] = group
                s = SimSubscriber(
                    name, group, f"{group}.{t}", self.history, subscription=sub, mode=mode,
                    ack_on_subok=self.moving, start_at=start_at,
                )  # fmt: skip
                self.factories[name] = lambda s=s: s  # type: ignore[misc]
        for name in self.factories:
            self._start(name, delay=self.rng.uniform(0, 0.3))
        faults = p.scenario or schedule_faults(self.rng, p, list(self.group_of), self.group_of)
        for f in faults:
            self._at(f.at, _FaultEvent(f))
        self._at(p.publish_until + 1.0, _Heal())
        self._at(0.1, _ServerTick())

    def _broker_factory(self, name: str, group: str) -> Callable[[], SimNode]:
        def make() -> SimNode:
            boot = f"{self.rng.getrandbits(32):08x}"
            if not self.p.disks:
                return SimCoreBroker(name, group, boot, self.broker, slots=self.moving)
            disk = self.disks.setdefault(name, SimDisk())
            log, boot, cut = disk.recover(lambda: boot)  # the product's scan, replay, rule
            if log is not None or cut:
                what = f"; {cut}" if cut else ""
                self.trace.step(
                    self.now,
                    f"{name} reads its disk: log to ts {log.last_ts if log is not None else 0}"
                    f"{what}; boot {boot}",
                )
            return SimCoreBroker(
                name, group, boot, self.broker, slots=self.moving, disk=disk, log=log
            )

        return make

    # --- queue -------------------------------------------------------------------------

    def _at(self, t: float, ev: _Event) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (t, self._seq, ev))

    def _to(self, node: str, ev: NodeEvent, delay: float = 0.0) -> None:
        self._at(self.now + delay, _ToNode(node, self.inc.get(node, 0), ev))

    # --- running -----------------------------------------------------------------------

    def run(self) -> Result:
        end = self.p.publish_until + 1.0 + self.p.quiet
        h = self.history
        while self.queue and not h.violations and self.trace.steps < self.p.max_steps:
            t, _, ev = heapq.heappop(self.queue)
            if t > end:
                break
            self.now = t
            self._step(ev)
            for g in sorted(self.dirty):
                worldchecks.check_group(self, g)
            self.dirty.clear()
        if not h.violations and self.trace.steps < self.p.max_steps:
            waiting = {
                n: len(node.unacked)
                for n, node in self.nodes.items()
                if isinstance(node, SimProducer)
            }
            h.check_liveness(waiting)
            if self.p.check_whole:
                worldchecks.check_whole(self)
            if self.moving:
                worldchecks.check_moves(self)
        violation = h.violations[0] if h.violations else None
        return Result(
            self.seed,
            self.trace.steps,
            self.faults_done,
            violation,
            self.trace.digest,
            self.trace.render(self.seed, violation, self._flags()),
        )

    def _flags(self) -> str:
        """The `tritonmq sim` options besides ``--seed`` that replay this run."""
        p, d = self.p, SimParams()
        if p.swarm:  # the seed draws the rest
            return " --swarm"
        if p.scenario_name:  # it sets what it needs
            flags = f" --scenario {p.scenario_name}" + (" --refusals" if p.refusals else "")
            return flags + (" --check-whole" if p.check_whole else "")
        flags = f" --groups {p.groups}" if p.groups != d.groups else ""
        flags += f" --moves {p.moves}" if self.moving and p.moves != d.moves else ""
        flags += f" --replicas {p.replicas}" if p.replicas != d.replicas else ""
        flags += f" --faults {p.faults}" if p.faults != d.faults else ""
        flags += " --refusals" if p.refusals else ""
        return flags + (" --check-whole" if p.check_whole else "")

    def _step(self, ev: _Event) -> None:
        match ev:
            case _ToNode(node=node, inc=inc, ev=nev):
                if self.inc.get(node) != inc or self.net.procs.get(node) is Proc.DOWN:
                    return
                if self.net.procs.get(node) is Proc.FROZEN:
                    self.held.setdefault(node, []).append(nev)
                    return
                self._deliver(node, nev)
            case _Arrive(conn=cid, to=to, msg=msg):
                conn = self.net.conns.get(cid)
                if conn is None or not conn.open:
                    return
                if not self.net.link_ok(conn.a, conn.b):
                    conn.held.append((to, msg))
                    return
                if self.net.running(to):
                    self._deliver(to, Received(cid, msg))
                else:
                    self._hold(to, cid, msg)
            case _ZkArrive():
                self._zk_arrive(ev)
            case _Heartbeat(node=node, inc=inc):
                self._heartbeat(node, inc)
            case _PingCheck(conn=cid):
                self._ping_check(cid)
            case _FaultEvent(fault=f):
                self._fault(f)
            case _ServerTick():
                for sid, prefix in self.zk.expire_due(self.now):
                    self._fire_watch(sid, prefix)
                self._at(self.now + 0.1, _ServerTick())
            case _Heal():
                self._heal()
            case _WatchDue(node=node, inc=inc, prefix=prefix):
                self.pending_watches.discard((node, inc, prefix))
                self._step(_ToNode(node, inc, WatchFired(prefix)))
            case _TickDue(node=node, inc=inc):
                if self.inc.get(node) == inc and self.net.procs.get(node) is Proc.RUNNING:
                    self._at(self.now + self._tick_of(node), _TickDue(node, inc))
                    sub = self.nodes[node]
                    if not (isinstance(sub, SimSubscriber) and sub.conn is not None):
                        self._deliver(node, Ticked())  # a connected subscriber has no timer

    def _hold(self, to: str, cid: int, msg: Any) -> None:
        if self.net.procs.get(to) is Proc.FROZEN:
            self.held.setdefault(to, []).append(Received(cid, msg))

    def _deliver(self, name: str, ev: NodeEvent) -> None:
        node = self.nodes[name]
        effects = node.handle(ev, self.now)
        quiet = isinstance(ev, Ticked) and not effects
        self.trace.step(self.now, f"{name} <- {describe(ev)}", quiet=quiet)
        for e in effects:
            self._perform(name, e)
        if isinstance(ev, Received | ZkReplied) and isinstance(node, SimCoreBroker):
            self.dirty.add(node.group)

    # --- effects -----------------------------------------------------------------------

    def _perform(self, name: str, e: Effect) -> None:
        match e:
            case Send(conn=cid, msg=msg):
                conn = self.net.conns.get(cid)
                if conn is None or not conn.open:
                    return
                if isinstance(msg, PubAcked):
                    worldchecks.acked_copies(self, name, msg, conn.other(name))
                to = conn.other(name)
                self._at(self.net.arrival(conn, self.now), _Arrive(cid, to, msg))
            case DialOut(peer=peer, kind=kind, tag=tag):
                outcome = self.net.dial(name, peer)
                if outcome is Dial.CONNECTED:
                    conn = self.net.open(name, peer, kind)
                    d = self.net.delay()
                    conn.known_at = {peer: self.now + d, name: self.now + 2 * d}
                    self._to(peer, Accepted(conn.id, name, kind), d)
                    self._to(name, Dialed(tag, peer, outcome, conn.id), 2 * d)
                elif outcome is Dial.REFUSED:
                    self._to(name, Dialed(tag, peer, outcome, None), 2 * self.net.delay())
                else:
                    self._to(name, Dialed(tag, peer, outcome, None), OPEN_TIMEOUT)
            case CloseConn(conn=cid):
                conn = self.net.conns.get(cid)
                if conn is not None and conn.open:
                    self._close(conn, timed_out=False, closer=name)
            case ZkRequest():
                self._zk_send(name, e)
            case ZkWatch(prefix=prefix):
                sid = self.sessions.get(name)
                if sid is not None:
                    self.zk.watch(sid, prefix)
            case Note(text=text):
                self.trace.step(self.now, f"{name}: {text}")
            case PurgedUpto(topic=topic, upto=upto):
                self.history.purged(topic, upto, self.group_of[name])
            case AcceptedWrites(epoch=epoch):
                node = self.nodes[name]
                boot = node.me.boot if isinstance(node, SimCoreBroker) else ""
                self.history.accepted_writes(self.group_of[name], epoch, f"{name}/{boot}")
            case Leads():
                self.history.primary_elected(self.group_of[name], name, self.now)

    def _close(self, conn: Conn, *, timed_out: bool, closer: str | None) -> None:
        self.net.close(conn)
        for end in (conn.a, conn.b):
            if end == closer:
                continue
            delay = PING_TIMEOUT if timed_out else self.net.delay()
            # Never before the end has heard of the connection: a reset follows the open.
            t = max(self.now + delay, conn.known_at.get(end, 0.0))
            self._at(t, _ToNode(end, self.inc.get(end, 0), Closed(conn.id, timed_out)))

    # --- ZooKeeper -----------------------------------------------------------------------

    def _zk_send(self, name: str, req: ZkRequest) -> None:
        sid = self.sessions.get(name)
        if sid is None or self.session_state.get(name) is not SessionState.CONNECTED:
            self._to(name, ZkReplied(req.tag, req.op, ZkResult(Outcome.UNKNOWN)), ZK_TIMEOUT)
            return
        lose = False
        group = self.group_of[name]
        if isinstance(req.op, ZkSet) and req.op.version >= 0 and self.zk_flaky.get(group, 0) > 0:
            self.zk_flaky[group] -= 1
            lose = True
            self.trace.fault(self.now, f"ConnectionLoss on {name}'s {req.tag} ({req.op.path})")
        inc = self.inc[name]
        at = self.now + self.net.delay()
        if self.p.slow_loads and isinstance(req.op, ZkList) and req.op.prefix == _OFFSETS:
            # read late, the shell's loads in turn: its reads of each topic take a while
            at = max(at + self.rng.uniform(0.0, self.p.slow_loads), self.loads_due.get(name, 0))
            self.loads_due[name] = at
        self._at(at, _ZkArrive(name, inc, sid, req, lose))

    def _zk_arrive(self, ev: _ZkArrive) -> None:
        name, req = ev.node, ev.req
        if not self.net.link_ok(name, ZK) or (ev.lose_reply and self.rng.random() < 0.5):
            # Lost on the way: the caller learns only that it does not know.
            self._at(
                self.now + ZK_TIMEOUT,
                _ToNode(name, ev.inc, ZkReplied(req.tag, req.op, ZkResult(Outcome.UNKNOWN))),
            )
            return
        result, fired = self.zk.apply(ev.session, req.op)
        if result.outcome is Outcome.OK:
            self._observe_write(req)
        for sid, prefix in fired:
            self._fire_watch(sid, prefix)
        if result.outcome is Outcome.OK and isinstance(req.op, ZkSet | ZkCreate):
            if req.op.path.startswith(_GROUPS):
                self.dirty.add(req.op.path.split("/")[2])
        if result.outcome is Outcome.OK and isinstance(req.op, ZkMulti):
            self.trace.step(
                self.now, f"{name}: wrote {req.op.sets[0].path} {req.op.sets[0].data.decode()}"
            )
        if ev.lose_reply:
            result = ZkResult(Outcome.UNKNOWN)
        reply = ZkReplied(req.tag, req.op, result)
        self._at(self.now + self.net.delay(), _ToNode(name, ev.inc, reply))

    def _observe_write(self, req: ZkRequest) -> None:
        op = req.op
        if isinstance(op, ZkSet | ZkCreate) and op.path.startswith(_OFFSETS):
            _, _, topic, name = op.path.split("/")
            era = op.data[2] if len(op.data) > 2 else 0
            self.history.offset_stored(topic, name, op.data[1], isinstance(op, ZkCreate), era)

    def _fire_watch(self, sid: int, prefix: str) -> None:
        owner = self.zk.sessions[sid].owner
        # Coalesced per incarnation: one due to a crashed process is dropped on arrival and
        # must not swallow its restarted successor's (simulator bug; test_world.py::
        # test_a_restarted_broker_hears_of_changes_while_its_old_incarnation_s_watch_is_late).
        key = (owner, self.inc.get(owner, 0), prefix)
        if key in self.pending_watches:
            return  # coalesced with the notification already on its way
        self.pending_watches.add(key)
        delay = self.rng.uniform(0.001, self.watch_delay)
        self._at(self.now + delay, _WatchDue(*key))

    def _heartbeat(self, name: str, inc: int) -> None:
        if self.inc.get(name) != inc or self.net.procs.get(name) is not Proc.RUNNING:
            return
        sid = self.sessions[name]
        timeout = self.p.broker.session_timeout
        self._at(self.now + timeout / 3, _Heartbeat(name, inc))
        state = self.session_state[name]
        if self.net.link_ok(name, ZK):
            if self.zk.heartbeat(sid, self.now):
                self.last_zk_ok[name] = self.now
                if state is not SessionState.CONNECTED:
                    self._set_session(name, SessionState.CONNECTED)
            else:
                self._set_session(name, SessionState.LOST)
                self._open_session(name)
        elif state is SessionState.CONNECTED and self.now - self.last_zk_ok[name] > timeout * 2 / 3:
            self._set_session(name, SessionState.SUSPENDED)

    def _open_session(self, name: str) -> None:
        self.sessions[name] = self.zk.open_session(name, self.now)
        node = self.nodes.get(name)
        if isinstance(node, SimCoreBroker):
            node.zk_session = self.sessions[name]
        self.last_zk_ok[name] = self.now
        self._set_session(name, SessionState.CONNECTED)

    def _set_session(self, name: str, state: SessionState) -> None:
        """Tell the node, in order (one client, one event thread)."""
        self.session_state[name] = state
        t = max(self.now + self.net.delay(), self.session_note_at.get(name, 0.0))
        self.session_note_at[name] = t
        self._at(t, _ToNode(name, self.inc[name], SessionChanged(state)))

    # --- processes ---------------------------------------------------------------------

    def _start(self, name: str, delay: float = 0.0) -> None:
        self.inc[name] = self.inc.get(name, 0) + 1
        self.nodes[name] = self.factories[name]()
        self.net.procs[name] = Proc.RUNNING
        self.held.pop(name, None)
        inc = self.inc[name]
        self._at(self.now + delay, _ToNode(name, inc, Booted()))
        self.sessions[name] = self.zk.open_session(name, self.now + delay)
        self.last_zk_ok[name] = self.now + delay
        self.session_state[name] = SessionState.CONNECTED
        self._at(
            self.now + delay + 0.001, _ToNode(name, inc, SessionChanged(SessionState.CONNECTED))
        )
        self._at(self.now + delay + self.p.broker.session_timeout / 3, _Heartbeat(name, inc))
        self._schedule_tick(name, inc, self.now + delay + self.rng.uniform(0, self._tick_of(name)))

    def _tick_of(self, name: str) -> float:
        """Brokers tick as the shell's timers do; clients only need to notice retries."""
        return TICK if isinstance(self.nodes.get(name), SimCoreBroker) else CLIENT_TICK

    def _schedule_tick(self, name: str, inc: int, t: float) -> None:
        self._at(t, _TickDue(name, inc))

    def _crash(self, name: str) -> None:
        node = self.nodes[name]
        if isinstance(node, SimCoreBroker):
            self.graveyard.append((node.group, f"{name}/{node.me.boot}", node.log))
        self.net.procs[name] = Proc.DOWN
        self.net.refusing = {r for r in self.net.refusing if r[0] != name}  # restarts listening
        self.held.pop(name, None)
        for conn in self.net.conns_of(name):
            self._close(conn, timed_out=not self.net.link_ok(conn.a, conn.b), closer=name)

    def _freeze(self, name: str) -> None:
        self.net.procs[name] = Proc.FROZEN
        for conn in self.net.conns_of(name):
            self._at(self.now + PING_TIMEOUT, _PingCheck(conn.id))

    def _thaw(self, name: str) -> None:
        if self.net.procs.get(name) is not Proc.FROZEN:
            return
        self.net.procs[name] = Proc.RUNNING
        inc = self.inc[name]
        for ev in self.held.pop(name, []):
            self._at(self.now, _ToNode(name, inc, ev))
        for conn in self.net.conns_of(name):
            self._flush(conn)
        self._at(self.now, _Heartbeat(name, inc))
        self._schedule_tick(name, inc, self.now + self._tick_of(name))

    def _flush(self, conn: Conn) -> None:
        if not self.net.link_ok(conn.a, conn.b):
            return
        held, conn.held = conn.held, []
        for to, msg in held:
            self._at(self.net.arrival(conn, self.now), _Arrive(conn.id, to, msg))

    def _ping_check(self, cid: int) -> None:
        conn = self.net.conns.get(cid)
        if conn is None or not conn.open:
            return
        stuck = not self.net.link_ok(conn.a, conn.b) or any(
            self.net.procs.get(e) is Proc.FROZEN for e in (conn.a, conn.b)
        )
        if stuck:
            self._close(conn, timed_out=True, closer=None)

    def _cut(self) -> None:
        """Connections over a cut link die of ping timeouts unless it heals first."""
        for conn in list(self.net.conns.values()):
            if conn.open and not self.net.link_ok(conn.a, conn.b):
                self._at(self.now + PING_TIMEOUT, _PingCheck(conn.id))

    def _heal_links(self) -> None:
        for conn in list(self.net.conns.values()):
            if conn.open:
                self._flush(conn)

    # --- faults ------------------------------------------------------------------------

    def group_brokers(self, group: str) -> list[str]:
        return sorted(
            n
            for n, node in self.nodes.items()
            if isinstance(node, SimCoreBroker) and self.group_of[n] == group
        )

    def _role(self, target: str) -> str:
        """The broker a scenario's "@primary:g0", "@backup:g0" (first in-sync backup not
        bound yet) or "@outside:g0" (first replica out of the ISR) names right now;
        "...=Y" binds it to label Y, and "@=Y" names it again later."""
        if not target.startswith("@"):
            return target
        spec, _, label = target[1:].partition("=")
        if not spec:
            return self.bound.get(label, "")
        role, group = spec.split(":")
        st = self.zk.nodes.get(paths.state(CHROOT, group))
        if st is None:
            return ""
        state: GroupState = st.data
        taken = set(self.bound.values())
        if role == "primary":
            name = state.primary
        elif role == "outside":  # a replica the ISR left out
            left = [n for n in self.group_brokers(group) if n not in state.isr]
            name = left[0] if left else ""
        else:
            backups = sorted(m for m in state.isr if m != state.primary and m not in taken)
            name = backups[0] if backups else ""
        if label and name:
            self.bound[label] = name
        return name

    def _fault(self, f: Fault) -> None:
        if f.target.startswith("@") or f.other.startswith("@"):
            f = dataclasses.replace(f, target=self._role(f.target), other=self._role(f.other))
            if not f.target:
                return
        target = f.target
        if self.healed:
            return
        match f.kind:
            case FaultKind.CRASH_GROUP:
                group = self.group_of[target]
                down = [b for b in sorted(self.group_of) if self.group_of[b] == group
                        and b.startswith(group + "b") and self.net.procs.get(b) is not Proc.DOWN]  # fmt: skip
                self.trace.fault(self.now, f"crash every broker of {group}: {down}")
                for b in down:
                    self._crash(b)
                    self._at(
                        self.now + f.duration, _FaultEvent(Fault(FaultKind.RESTART, b, 0.0, 0.0))
                    )
            case FaultKind.TEAR | FaultKind.FLIP:
                if self.net.procs.get(target) is Proc.DOWN:
                    return
                # a flipped bit loses what the replica acknowledged: only where the rest
                # of its ISR keeps it (as a crash without disks)
                if f.kind is FaultKind.FLIP and not self._may_lose_memory(target):
                    self.trace.step(self.now, f"skip flip of {target}: would risk its group")
                    return
                self._crash(target)
                disk = self.disks[target]
                what = disk.tear(self.rng) if f.kind is FaultKind.TEAR else disk.flip(self.rng)
                self.trace.fault(self.now, f"crash {target}, {what}, restart in {f.duration:.2f}s")
                self._at(
                    self.now + f.duration, _FaultEvent(Fault(FaultKind.RESTART, target, 0.0, 0.0))
                )
            case FaultKind.CRASH:
                # A scenario may force a crash (other="force") where it knows the ISR's
                # survivors still keep the promise checkable; with disks a crash keeps
                # everything acknowledged (D1).
                if f.other != "force" and not self.p.disks and not self._may_lose_memory(target):
                    self.trace.step(self.now, f"skip crash of {target}: would risk its group")
                    return
                self.trace.fault(self.now, f"crash {target}, restart in {f.duration:.2f}s")
                self._crash(target)
                self._at(
                    self.now + f.duration, _FaultEvent(Fault(FaultKind.RESTART, target, 0.0, 0.0))
                )
            case FaultKind.RESTART:
                if self.net.procs.get(target) is Proc.DOWN:
                    self.trace.fault(self.now, f"restart {target}")
                    self._start(target)
                return
            case FaultKind.FREEZE:
                if self.net.procs.get(target) is not Proc.RUNNING:
                    return
                self.trace.fault(self.now, f"freeze {target} for {f.duration:.2f}s")
                self._freeze(target)
                self._at(
                    self.now + f.duration, _FaultEvent(Fault(FaultKind.THAW, target, 0.0, 0.0))
                )
            case FaultKind.THAW:
                if self.net.procs.get(target) is Proc.FROZEN:  # not if it crashed meanwhile
                    self.trace.fault(self.now, f"thaw {target}")
                    self._thaw(target)
                return
            case FaultKind.PARTITION:
                pair = frozenset((target, f.other))
                self.trace.fault(
                    self.now, f"partition {target} <-> {f.other} for {f.duration:.2f}s"
                )
                self.net.cuts.add(pair)
                self._cut()
                self._at(
                    self.now + f.duration,
                    _FaultEvent(Fault(FaultKind.HEAL, target, 0.0, 0.0, f.other)),
                )
            case FaultKind.ZK_CUT:
                pair = frozenset((target, ZK))
                self.trace.fault(self.now, f"cut {target} from ZooKeeper for {f.duration:.2f}s")
                self.net.cuts.add(pair)
                self._at(
                    self.now + f.duration, _FaultEvent(Fault(FaultKind.HEAL, target, 0.0, 0.0, ZK))
                )
            case FaultKind.HEAL:
                self.trace.fault(self.now, f"heal {target} <-> {f.other}")
                self.net.cuts.discard(frozenset((target, f.other)))
                self._heal_links()
                return
            case FaultKind.ZK_LOSS:
                group = self.group_of[target]
                self.trace.fault(self.now, f"the next CAS in {group} ends in ConnectionLoss")
                self.zk_flaky[group] = self.zk_flaky.get(group, 0) + 1
            case FaultKind.SLOW_WATCHES:
                self.trace.fault(self.now, f"watches late by up to {f.duration:.2f}s")
                self.watch_delay = f.duration
            case FaultKind.REFUSE:
                rule = (target, f.other)
                if self.net.procs.get(target) is not Proc.RUNNING or rule in self.net.refusing:
                    return
                whom = f" to {f.other}" if f.other else ""
                self.trace.fault(
                    self.now, f"{target} refuses connections{whom} for {f.duration:.2f}s"
                )
                self.net.refusing.add(rule)
                for conn in self.net.conns_of(target):
                    if conn.b == target and self.net.refuses(target, conn.a):  # reset
                        self._close(conn, timed_out=False, closer=None)
                self._at(
                    self.now + f.duration,
                    _FaultEvent(Fault(FaultKind.LISTEN, target, 0.0, 0.0, f.other)),
                )
            case FaultKind.LISTEN:
                if (target, f.other) in self.net.refusing:
                    self.trace.fault(self.now, f"{target} accepts connections again")
                    self.net.refusing.discard((target, f.other))
                return
            case FaultKind.MOVE_SLOT:
                groups = sorted(
                    {g for n, g in self.group_of.items() if n[len(g) :].startswith("b")}
                )
                what, fired = slotops.operator_step(self.zk, self.rng, groups, target, self.now)
                self.trace.fault(self.now, what)
                for sid, prefix in fired:
                    self._fire_watch(sid, prefix)
        self.faults_done += 1

    def _may_lose_memory(self, name: str) -> bool:
        """Crash only where the group keeps every other replica running and in sync, so
        the promise (no loss while an in-sync replica survives) stays testable."""
        group = self.group_of[name]
        if not name.startswith(group + "b"):
            return True
        st = self.zk.nodes.get(paths.state(CHROOT, group))
        if st is None:
            return False
        state: GroupState = st.data
        for other in self.nodes:
            if other == name or self.group_of[other] != group or other not in self.factories:
                continue
            node = self.nodes[other]
            if not isinstance(node, SimCoreBroker):
                continue
            if self.net.procs.get(other) is not Proc.RUNNING or not state.in_sync(node.me):
                return False
        return True

    def _heal(self) -> None:
        self.healed = True
        self.trace.fault(self.now, "heal everything")
        self.net.cuts.clear()
        self.net.refusing.clear()
        self.watch_delay = 0.05
        for name in sorted(self.nodes):
            if self.net.procs.get(name) is Proc.FROZEN:
                self._thaw(name)
            elif self.net.procs.get(name) is Proc.DOWN:
                self._start(name)
        self._heal_links()
