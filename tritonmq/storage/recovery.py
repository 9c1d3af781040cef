"""A broker's start from its ``data_dir``: the log its segment files describe, and the
incarnation (``boot``) it comes back as (blocking: run it off the event loop)."""

from __future__ import annotations

import gc
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonmq.core import journal
from tritonmq.core.log import GroupLog
from tritonmq.storage.segments import Recovered, SegmentStore
from tritonmq.wire.codec import paused_gc

log = logging.getLogger("tritonmq.storage")
BOOT_FILE = "boot"


@dataclass(slots=True)
class Opened:
    store: SegmentStore
    log: GroupLog
    boot: str
    recovered: Recovered
    kept_boot: bool  # came back as the incarnation it was (its log whole)


def incarnation(old_boot: str, damaged: bool, new_boot: Callable[[], str]) -> tuple[str, bool]:
    """The boot a broker back from its files comes back as, and whether it is its old one
    (D3): the same incarnation when its files held everything it wrote, a new one when
    they were damaged (or it had none). Pure: the simulator's restarts use it too."""
    if old_boot and not damaged:
        return old_boot, True
    return new_boot(), False


def open_data_dir(data_dir: str | Path, segment_bytes: int) -> Opened:
    """Read the segments, rebuild the log, and choose the incarnation to come back as.

    A replica whose files held everything it wrote comes back as the same incarnation: it
    holds every record it acknowledged, so the group state's ISR may still count it (after
    every replica of a group went down together, the first back leads with its records).
    One whose files were damaged before their end lost what it acknowledged: it comes back
    as a new incarnation, out of the ISR until it copied what it lacks from the primary,
    and is never elected over a replica that holds more (docs/replication.md D3)."""
    store = SegmentStore(Path(data_dir) / "log", segment_bytes)
    # No cyclic collection while millions of record tuples are built (none has a cycle):
    # the collector traversed all built so far, again and again, so 2,000,000 records took
    # 10.8 s instead of about 3. The rebuilt log then goes to the permanent generation, which
    # later collections of the running broker do not traverse.
    with paused_gc():
        recovered = store.recover()
        rebuilt = journal.replay(recovered.ops)
        recovered.ops = []  # replayed: let the operations go
    gc.freeze()
    boot_path = Path(data_dir) / BOOT_FILE
    old = boot_path.read_text().strip() if boot_path.exists() else ""
    boot, kept = incarnation(old, recovered.damaged, lambda: secrets.token_hex(6))
    if not kept:
        tmp = boot_path.with_suffix(".tmp")
        tmp.write_text(boot + "\n")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, boot_path)
    if recovered.cut:
        log.warning(
            "segment files: %s at %s; %d bytes after it dropped%s",
            recovered.cut,
            recovered.cut_at,
            recovered.dropped_bytes,
            "; coming back as a new incarnation that copies what it lacks"
            if recovered.damaged
            else "",
        )
    log.info(
        "segment files: %d operations in %d bytes; log ts %d..%d, %d records retained; boot %s%s",
        recovered.frames,
        recovered.bytes,
        rebuilt.base_ts,
        rebuilt.last_ts,
        rebuilt.records,
        boot,
        " (kept)" if kept else " (new)",
    )
    return Opened(store, rebuilt, boot, recovered, kept)
