"""The broker's segment files, in the shell: writes in line, fsync and retention off the loop.

The core decides what changed (``WriteLog``: core/journal.py); this performs it. A write
that the OS refuses (a full disk, an unwritable ``data_dir``) ends the process at once:
what the event would have acknowledged or replicated is then never sent, so nothing is
acknowledged that was not written, and the group's other replicas take over
(docs/operations.md, "Storage").
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence

from tritonmq.config import BrokerConfig
from tritonmq.core import journal
from tritonmq.core.journal import Op
from tritonmq.core.log import GroupLog
from tritonmq.storage.segments import SegmentStore, StorageError

log = logging.getLogger("tritonmq.storage")
RETENTION_EVERY_S = 5.0  # deletable segments are looked for this often
EXIT_STORAGE = 3  # the process's exit status when its segment files cannot be written


class Disk:
    def __init__(self, cfg: BrokerConfig, store: SegmentStore) -> None:
        self.cfg = cfg
        self.store = store
        self.synced = 0  # bytes written and fsynced

    def write(self, ops: Sequence[Op]) -> None:
        try:
            self.store.append(ops)
        except StorageError as e:
            log.critical("segment files cannot be written (%s): stopping at once", e)
            os._exit(EXIT_STORAGE)

    async def run(self, the_log: Callable[[], GroupLog | None]) -> None:
        """fsync every ``fsync_interval_s`` and delete what retention lets go, off the loop."""
        next_retention = time.monotonic() + RETENTION_EVERY_S
        while True:
            await asyncio.sleep(self.cfg.fsync_interval_s)
            if self.store.written != self.synced:
                self.synced = await asyncio.to_thread(self.store.sync)
            if time.monotonic() >= next_retention:
                next_retention = time.monotonic() + RETENTION_EVERY_S
                glog = the_log()
                if glog is not None:
                    await self._retain(glog)

    async def _retain(self, glog: GroupLog) -> None:
        upto = journal.purged_and_forgotten(glog)
        cfg = self.cfg
        now_ms = int(time.time() * 1000)
        gone = self.store.deletable(upto, now_ms, cfg.disk_retention_s, cfg.disk_retention_bytes)
        if not gone:
            return
        base = journal.base_of(glog, gone[-1].end_ts + 1)
        freed = await asyncio.to_thread(self.store.delete, gone, base)
        log.info("disk retention: %d segment(s) deleted, %d bytes", len(gone), freed)

    async def close(self) -> None:
        await asyncio.to_thread(self.store.sync)
        self.store.close()
