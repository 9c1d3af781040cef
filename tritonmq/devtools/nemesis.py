"""The chaos run's nemesis: a seeded schedule of faults, and how each is done to a
:class:`~tritonmq.devtools.cluster.DevCluster` of real processes.

The seed decides the schedule exactly (:func:`plan`): which fault, in which group,
against the primary or which backup, held how long, and the gap before the next.
Who *is* primary when a fault comes is up to the real processes, so the brokers a
run hits, and its timing, differ between two runs of one seed.

Faults run one at a time. Each ends with its repair (restart, SIGCONT, heal) and a
wait until every group has a primary and a full ISR again, so a fault never piles
onto an unhealed one: what a run checks is that the cluster survives each fault it
is designed to survive, and comes back.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, assert_never

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from tritonmq.coord import paths
from tritonmq.coord.zkclient import new_client
from tritonmq.devtools.cluster import DevCluster
from tritonmq.errors import TritonError

# How long a group may take to have a primary and a full ISR again after a repair.
HEAL_TIMEOUT = 60.0
# A planned stop that takes longer than this is given up on (SIGKILL) and reported.
TERM_TIMEOUT = 30.0


class FaultKind(enum.Enum):
    KILL_PRIMARY = "SIGKILL primary"
    KILL_BACKUP = "SIGKILL backup"
    TERM_PRIMARY = "SIGTERM primary"
    TERM_BACKUP = "SIGTERM backup"
    PAUSE_PRIMARY = "SIGSTOP primary"
    PAUSE_BACKUP = "SIGSTOP backup"
    KILL_TWO = "SIGKILL primary+backup"
    CUT_ZK_PRIMARY = "cut ZooKeeper of primary"
    CUT_ZK_BACKUP = "cut ZooKeeper of backup"
    # with segment files (chaos --data): the whole group at once, and a damaged file
    KILL_GROUP = "SIGKILL every broker of the group"
    CORRUPT_BACKUP = "flip a byte of a backup's segment"

    @property
    def on_primary(self) -> bool:
        return self in (
            FaultKind.KILL_PRIMARY,
            FaultKind.TERM_PRIMARY,
            FaultKind.PAUSE_PRIMARY,
            FaultKind.KILL_TWO,
            FaultKind.CUT_ZK_PRIMARY,
            FaultKind.KILL_GROUP,
        )


# (kind, weight, shortest hold, longest hold): a hold is how long the fault lasts before its
# repair. Freezes and ZooKeeper cuts span the 2 s session timeout both ways (short ones
# must not cost a failover, long ones must fail over and fence).
_MENU: tuple[tuple[FaultKind, int, float, float], ...] = (
    (FaultKind.KILL_PRIMARY, 4, 0.2, 3.0),
    (FaultKind.KILL_BACKUP, 3, 0.2, 3.0),
    (FaultKind.TERM_PRIMARY, 2, 0.2, 2.0),
    (FaultKind.TERM_BACKUP, 1, 0.2, 2.0),
    (FaultKind.PAUSE_PRIMARY, 3, 0.5, 6.0),
    (FaultKind.PAUSE_BACKUP, 2, 0.5, 6.0),
    (FaultKind.KILL_TWO, 2, 0.5, 3.0),
    (FaultKind.CUT_ZK_PRIMARY, 2, 0.5, 5.0),
    (FaultKind.CUT_ZK_BACKUP, 1, 0.5, 5.0),
)
# Only with segment files (a draw of its own after the others: a seed without them draws
# what it always drew).
_DATA_MENU: tuple[tuple[FaultKind, int, float, float], ...] = (
    (FaultKind.KILL_GROUP, 2, 0.2, 2.0),
    (FaultKind.CORRUPT_BACKUP, 2, 0.2, 1.0),
)
_GAP = (0.3, 2.0)  # seconds of calm after a fault has healed


@dataclass(frozen=True, slots=True)
class Fault:
    """One scheduled fault. ``pick`` chooses the backup (index among the group's other
    members, sorted by id) where the kind names one."""

    index: int
    kind: FaultKind
    group: str
    pick: int
    hold: float
    gap: float

    def describe(self) -> str:
        return f"#{self.index} {self.kind.value} of {self.group} for {self.hold:.1f}s"


def schedule(seed: int, groups: list[str], data: bool = False) -> Iterator[Fault]:
    """Seed ``seed``'s faults, without end: a run takes as many as its duration allows.
    ``data``: the brokers keep segment files, and their faults are drawn too."""
    rng = random.Random(seed)
    menu = _MENU + _DATA_MENU if data else _MENU
    kinds = [k for k, _, _, _ in menu]
    weights = [w for _, w, _, _ in menu]
    holds = {k: (lo, hi) for k, _, lo, hi in menu}
    for i in itertools.count(1):
        kind = rng.choices(kinds, weights)[0]
        lo, hi = holds[kind]
        yield Fault(
            index=i,
            kind=kind,
            group=rng.choice(groups),
            pick=rng.randrange(1 << 16),
            hold=round(rng.uniform(lo, hi), 2),
            gap=round(rng.uniform(*_GAP), 2),
        )


def plan(seed: int, count: int, groups: list[str], data: bool = False) -> list[Fault]:
    """The first ``count`` faults of seed ``seed``'s schedule."""
    return list(itertools.islice(schedule(seed, groups, data), count))


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """What a fault really did, and how long the cluster took to heal."""

    fault: Fault
    targets: tuple[str, ...]
    healed_in: float | None  # None: not healed within HEAL_TIMEOUT
    note: str = ""

    def describe(self) -> str:
        what = f"{self.fault.describe()} -> {', '.join(self.targets)}"
        healed = "NOT healed" if self.healed_in is None else f"healed in {self.healed_in:.1f}s"
        return f"{what}; {healed}" + (f" ({self.note})" if self.note else "")


class Nemesis:
    """Does faults to ``cluster``; blocking (run it on a worker thread). ``stopping``
    cuts holds and waits short, so that Ctrl-C ends a run promptly.

    ``acked_since(group, t)`` says whether the run's producers had a publish to
    ``group`` acknowledged after monotonic time ``t``: a group is healed only once it
    takes writes again, not merely once ZooKeeper says so.
    """

    def __init__(self, cluster: DevCluster, acked_since: Callable[[str, float], bool]) -> None:
        self.cluster = cluster
        self.acked_since = acked_since
        self.stopping = threading.Event()
        self.longest_term_exit = 0.0  # the slowest planned stop seen, seconds
        self._zk: KazooClient | None = None

    def start(self) -> None:
        self._zk = new_client(str(self.cluster.zk_hosts), timeout=2.0, auth=self.cluster.zk_auth)
        self._zk.start(timeout=15)

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def apply(self, fault: Fault) -> FaultRecord:
        c = self.cluster
        try:
            state, _ = self._read(fault.group)
        except KazooException:
            state = {}  # who is primary is unknown for a moment: hit the first broker
        members = sorted(b.id for b in c.brokers.values() if b.group == fault.group)
        current = state.get("primary")
        primary: str = current if isinstance(current, str) and current in members else members[0]
        others = [m for m in members if m != primary]
        backup = others[fault.pick % len(others)]
        target = primary if fault.kind.on_primary else backup
        targets: tuple[str, ...] = (
            (primary, backup) if fault.kind is FaultKind.KILL_TWO else (target,)
        )
        if fault.kind is FaultKind.KILL_GROUP:
            targets = (primary, *others)
        try:
            note = self._do(fault, targets)
        except (TritonError, OSError, subprocess.SubprocessError) as e:
            # A broker that does not come back is a finding, not the end of the run.
            note = f"repair failed: {e}"[:300]
        repaired = time.monotonic()
        return FaultRecord(fault, targets, self._await_healthy(repaired), note)

    def _do(self, fault: Fault, targets: tuple[str, ...]) -> str:
        """Inject ``fault`` into ``targets``, hold it, repair it; returns a note."""
        c = self.cluster
        note = ""
        match fault.kind:
            case FaultKind.KILL_PRIMARY | FaultKind.KILL_BACKUP | FaultKind.KILL_TWO:
                for t in targets:
                    c.kill(t)
                self._hold(fault.hold)
                if self.stopping.is_set():  # the run unwinds: start nothing the stop missed
                    return "not restarted: the run is stopping"
                for t in targets:
                    c.restart(t)
            case FaultKind.TERM_PRIMARY | FaultKind.TERM_BACKUP:
                note = self._term(targets[0])
                self._hold(fault.hold)
                if self.stopping.is_set():
                    return "not restarted: the run is stopping"
                c.restart(targets[0])
            case FaultKind.PAUSE_PRIMARY | FaultKind.PAUSE_BACKUP:
                pid = c.brokers[targets[0]].pid
                os.kill(pid, signal.SIGSTOP)
                try:
                    self._hold(fault.hold)
                finally:
                    os.kill(pid, signal.SIGCONT)
            case FaultKind.CUT_ZK_PRIMARY | FaultKind.CUT_ZK_BACKUP:
                c.cut_zk(targets[0])
                try:
                    self._hold(fault.hold)
                finally:
                    c.heal_zk(targets[0])
            case FaultKind.KILL_GROUP:
                procs = [c.brokers[t].proc for t in targets]
                for proc in procs:  # at the same moment, as a power cut of processes
                    if proc is not None:
                        proc.send_signal(signal.SIGKILL)
                for proc in procs:
                    if proc is not None:
                        proc.wait(timeout=30)
                self._hold(fault.hold)
                if self.stopping.is_set():
                    return "not restarted: the run is stopping"
                for t in targets:
                    c.restart(t)
            case FaultKind.CORRUPT_BACKUP:
                c.kill(targets[0])
                note = flip_a_byte(c, targets[0], fault.pick)
                self._hold(fault.hold)
                if self.stopping.is_set():
                    return "not restarted: the run is stopping"
                c.restart(targets[0])
            case _:
                assert_never(fault.kind)
        return note

    def _term(self, bid: str) -> str:
        """A planned stop; returns a note if it had to be forced."""
        proc = self.cluster.brokers[bid].proc
        assert proc is not None
        t0 = time.monotonic()
        proc.terminate()
        try:
            proc.wait(timeout=TERM_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.longest_term_exit = max(self.longest_term_exit, TERM_TIMEOUT)
            return f"SIGTERM did not stop {bid} within {TERM_TIMEOUT:.0f}s: SIGKILLed"
        took = time.monotonic() - t0
        self.longest_term_exit = max(self.longest_term_exit, took)
        return f"exited {took:.1f}s after SIGTERM" if took > 2.0 else ""

    def _hold(self, seconds: float) -> None:
        self.stopping.wait(seconds)

    def heal_all(self) -> float | None:
        """Undo everything: heal cuts, thaw, restart the dead; then wait for health."""
        c = self.cluster
        c.heal()
        for b in c.brokers.values():
            if b.alive:
                os.kill(b.pid, signal.SIGCONT)
        for b in c.brokers.values():
            if not b.alive:
                with contextlib.suppress(TritonError):  # then it is reported as not healed
                    c.restart(b.id)
        return self._await_healthy(time.monotonic())

    def _read(self, group: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The group's state znode and its members' znodes (ZooKeeper's view)."""
        assert self._zk is not None, "Nemesis.start() first"
        chroot = self.cluster.chroot
        try:
            raw, _ = self._zk.get(paths.state(chroot, group))
            state: dict[str, Any] = json.loads(raw)
        except NoNodeError:
            state = {}
        members = {}
        for m in self._zk.get_children(paths.members(chroot, group)):
            try:
                raw, _ = self._zk.get(paths.member(chroot, group, m))
            except NoNodeError:
                continue
            members[m] = json.loads(raw)
        return state, members

    def group_healthy(self, group: str, since: float) -> bool:
        """A live primary, every broker of the group in the ISR *as the incarnation that
        runs now* (its boot in the state matches its member znode), and a write
        acknowledged since ``since``."""
        state, members = self._read(group)
        want = {b.id for b in self.cluster.brokers.values() if b.group == group}
        boots = state.get("boots")
        return (
            state.get("primary") in members
            and set(state.get("isr", ())) == want
            and want <= set(members)
            and (boots is None or all(boots.get(m) == members[m].get("boot") for m in want))
            and self.acked_since(group, since)
        )

    def _await_healthy(self, since: float) -> float | None:
        """Seconds from ``since`` until every group is healthy (:meth:`group_healthy`);
        None if not within HEAL_TIMEOUT (a liveness failure the run reports) or the run
        is stopping."""
        groups = self.cluster.groups
        while not self.stopping.is_set():
            try:
                if all(self.group_healthy(g, since) for g in groups):
                    return time.monotonic() - since
            except (KazooException, TritonError):
                pass  # ZooKeeper busy for a moment: ask again
            if time.monotonic() - since > HEAL_TIMEOUT:
                return None
            self.stopping.wait(0.2)
        return None


def flip_a_byte(c: DevCluster, bid: str, pick: int) -> str:
    """Flip one bit of a byte of ``bid``'s segment files (chosen by ``pick``); a note."""
    segs = sorted((c.data_dir(bid) / "log").glob("*.seg"))
    segs = [p for p in segs if p.stat().st_size > 0]
    if not segs:
        return "no segment to damage"
    seg = segs[pick % len(segs)]
    data = bytearray(seg.read_bytes())
    at = (pick * 7919) % len(data)
    data[at] ^= 1 << (pick % 8)
    seg.write_bytes(bytes(data))
    return f"flipped a bit of {seg.name} at byte {at}"
