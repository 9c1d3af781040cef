"""The broker's segment files, in the shell: writes in line, fsync and retention off the loop.

The core decides what changed (``WriteLog``: core/journal.py); this performs it. A write
that the OS refuses (a full disk, an unwritable ``data_dir``) ends the process at once:
what the event would have acknowledged or replicated is then never sent, so nothing is
acknowledged that was not written, and the group's other replicas take over
(docs/operations.md, "Storage").

fsyncs run on a thread, one at a time: every ``fsync_interval_s``, or at once when the core
asks (``SyncLog``: a ``synced`` publish waits). Each reports ``Synced(ts)`` to the core:
the log's end when the fsync began, less anything a truncation took meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence

from tritonmq.config import BrokerConfig
from tritonmq.core import journal
from tritonmq.core.events import Event, Synced
from tritonmq.core.journal import Op
from tritonmq.core.log import GroupLog
from tritonmq.storage.segments import SegmentStore, StorageError

log = logging.getLogger("tritonmq.storage")
RETENTION_EVERY_S = 5.0  # deletable segments are looked for this often
EXIT_STORAGE = 3  # the process's exit status when its segment files cannot be written


class Disk:
    def __init__(
        self,
        cfg: BrokerConfig,
        store: SegmentStore,
        feed: Callable[[Event], None],
        written_ts: int = 0,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.feed = feed
        # the log's end as of the last write (at start: what recovery read, and fsynced)
        self.written_ts = written_ts
        self.synced = 0  # store.written as of the last fsync's start
        self._cut: int | None = None  # the lowest ts a truncation kept during an fsync
        self._soon = asyncio.Event()

    def write(self, ops: Sequence[Op], last_ts: int) -> None:
        try:
            self.store.append(ops)
        except StorageError as e:
            log.critical("segment files cannot be written (%s): stopping at once", e)
            os._exit(EXIT_STORAGE)
        self.written_ts = last_ts
        if (cut := journal.lowest_cut(ops)) is not None:
            self._cut = cut if self._cut is None else min(self._cut, cut)

    def sync_soon(self) -> None:
        self._soon.set()

    async def run(self, the_log: Callable[[], GroupLog | None]) -> None:
        """fsync when asked or every ``fsync_interval_s``; delete what retention lets go."""
        next_retention = time.monotonic() + RETENTION_EVERY_S
        while True:
            try:
                async with asyncio.timeout(self.cfg.fsync_interval_s):
                    await self._soon.wait()
            except TimeoutError:
                pass
            asked = self._soon.is_set()
            self._soon.clear()
            if self.store.written != self.synced:
                await self._sync()
            elif asked:  # nothing unsynced: what was written is on the disk already
                self.feed(Synced(self.written_ts, time.monotonic()))
            if time.monotonic() >= next_retention:
                next_retention = time.monotonic() + RETENTION_EVERY_S
                glog = the_log()
                if glog is not None:
                    try:
                        await self._retain(glog)
                    except OSError as e:  # tried again later; the log is whole meanwhile
                        log.error("disk retention failed: %s", e)

    async def _sync(self) -> None:
        # what this fsync covers is what was written when it was asked, taken here on the
        # loop: bytes written meanwhile may reach the disk too, but are fsynced again next
        ts, start, self._cut = self.written_ts, self.store.written, None
        try:
            await asyncio.to_thread(self.store.sync)
        except OSError as e:  # after EIO the kernel may have dropped the pages: a later
            log.critical("segment files cannot be fsynced (%s): stopping at once", e)
            os._exit(EXIT_STORAGE)  # fsync's success would be a lie
        self.synced = start
        if self._cut is not None:  # cut while it ran: above it are other records now
            ts = min(ts, self._cut)
        self.feed(Synced(ts, time.monotonic()))

    async def _retain(self, glog: GroupLog) -> None:
        upto = journal.purged_and_forgotten(glog)
        cfg = self.cfg
        now_ms = int(time.time() * 1000)
        gone = self.store.deletable(upto, now_ms, cfg.disk_retention_s, cfg.disk_retention_bytes)
        if not gone:
            return
        base = journal.base_of(glog, gone[-1].end_ts + 1)
        freed = await asyncio.to_thread(self.store.delete_files, gone, base)
        self.store.forget(gone)  # on the loop, which appends to the list
        log.info("disk retention: %d segment(s) deleted, %d bytes", len(gone), freed)

    async def close(self) -> None:
        await asyncio.to_thread(self.store.sync)
        self.store.close()
