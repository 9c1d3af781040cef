"""A simulated replica's disk (docs/replication.md D1-D3): the bytes its segment files
would hold, framed by the product's own code (storage/segments.py), and its boot; it
outlives the process. A crash keeps what was written; a torn tail cuts the last write
short; a flipped bit damages a byte anywhere. A restart reads it with the product's own
scan, replay and incarnation rule, as a broker does from its files."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tritonmq.core import journal
from tritonmq.core.journal import Op
from tritonmq.core.log import GroupLog
from tritonmq.storage.recovery import incarnation
from tritonmq.storage.segments import frames_of, scan


@dataclass(slots=True)
class SimDisk:
    data: bytearray = field(default_factory=bytearray)
    synced: int = 0  # bytes fsynced (a power loss keeps only these)
    boot: str = ""  # the incarnation its files belong to ("": none yet)

    def write(self, ops: Sequence[Op]) -> None:
        self.data += frames_of(ops)

    def sync(self) -> None:
        self.synced = len(self.data)

    def tear(self, rng: random.Random) -> str:
        """A crash in the middle of a write: the start of a frame whose event never got to
        act (its acknowledgements follow the write, D1), as a process killed mid-write(2)
        leaves it. Tearing what was already written and acknowledged would be a power loss,
        which `written` does not promise to survive (D4)."""
        frame = frames_of([(journal.APPEND, 1, [])])
        n = rng.randint(1, len(frame) - 1)
        self.data += frame[:n]
        return f"a write cut after {n} of its {len(frame)} bytes"

    def flip(self, rng: random.Random) -> str:
        """One bit of one byte flipped, anywhere."""
        if not self.data:
            return "nothing to flip"
        at = rng.randrange(len(self.data))
        self.data[at] ^= 1 << rng.randrange(8)
        return f"flipped a bit of byte {at} of {len(self.data)}"

    def recover(self, new_boot: Callable[[], str]) -> tuple[GroupLog | None, str, str]:
        """The log the disk holds (None: nothing), the boot to come back as, and where the
        valid log ended if not at the end ("" or the cut)."""
        ops, valid, cut = scan(bytes(self.data), last=True)
        if cut:
            del self.data[valid:]
            self.synced = min(self.synced, valid)
        boot, _ = incarnation(self.boot, bool(cut) and cut != "torn tail", new_boot)
        self.boot = boot
        return (journal.replay(ops) if ops else None), boot, cut
