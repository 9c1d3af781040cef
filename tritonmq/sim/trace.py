"""The trace of a run: every step as one line, the last ones kept for the report."""

from __future__ import annotations

from collections import deque
from hashlib import blake2b
from typing import Any

from tritonmq.sim.node import NodeEvent, Received, ZkReplied


class Trace:
    """Keeps the last ``keep`` lines and a digest of all of them (same seed, same digest)."""

    def __init__(self, keep: int = 60) -> None:
        self.lines: deque[str] = deque(maxlen=keep)
        self.faults: list[str] = []
        self._digest = blake2b(digest_size=16)
        self.steps = 0

    def step(self, now: float, text: str, *, quiet: bool = False) -> None:
        """Count a step; a quiet one (a timer that did nothing) is left out of the report
        but not out of the digest."""
        self.steps += 1
        line = f"{now:9.4f} {text}"
        if not quiet:
            self.lines.append(line)
        self._digest.update(line.encode())

    def fault(self, now: float, text: str) -> None:
        self.faults.append(f"{now:9.4f} {text}")
        self.step(now, f"FAULT {text}")

    @property
    def digest(self) -> str:
        return self._digest.hexdigest()

    def render(self, seed: int, violation: str | None, flags: str = "") -> str:
        """The report; ``flags``: the options that replay the run besides the seed."""
        out = [f"seed {seed}: {violation or 'no violation'}", "", "faults:"]
        out += [f"  {f}" for f in self.faults] or ["  (none)"]
        out += ["", f"last {len(self.lines)} of {self.steps} steps:"]
        out += [f"  {line}" for line in self.lines]
        if violation:
            out += ["", f"VIOLATION: {violation}", f"replay: tritonmq sim --seed {seed}{flags}"]
        return "\n".join(out)


def describe(ev: NodeEvent) -> str:
    match ev:
        case Received(conn=conn, msg=msg):
            return f"#{conn} {short(msg)}"
        case ZkReplied(tag=tag, result=result):
            return f"zk {tag}: {result.outcome.value}"
    return type(ev).__name__


def short(msg: Any) -> str:
    name = type(msg).__name__
    for f in ("id", "sid", "epoch", "ts", "start", "commit", "truncate_to", "code", "last_ts"):
        v = getattr(msg, f, None)
        if v is not None:
            name += f" {f}={v}"
    entries = getattr(msg, "entries", None) or getattr(msg, "records", None)
    if entries:
        name += f" n={len(entries)}"
    return name
