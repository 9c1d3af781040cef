"""The shell's disk (broker/disk.py, docs/replication.md D4): what an fsync reports is what
it covers, an fsync that fails ends the process, and an fsync asked of files with nothing
unsynced reports at once, so a `synced` publish never waits for a write that never comes."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_moves import member, only
from tritonmq.broker import disk as disk_module
from tritonmq.broker.disk import EXIT_STORAGE, Disk
from tritonmq.config import BrokerConfig
from tritonmq.core.actions import ProposeState
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import CasDone, CasOutcome, Synced, ZkView
from tritonmq.core.log import GroupLog
from tritonmq.storage.segments import SegmentStore


def setup(tmp_path: Path) -> tuple[SegmentStore, Disk, GroupLog, list[int]]:
    store = SegmentStore(tmp_path)
    store.recover()
    cfg = BrokerConfig(id="a", group="g", data_dir=str(tmp_path), fsync_interval_s=0.05)
    seen: list[int] = []
    disk = Disk(cfg, store, lambda ev: seen.append(ev.ts) if isinstance(ev, Synced) else None)
    log = GroupLog()
    log.journal = []
    return store, disk, log, seen


def write(disk: Disk, log: GroupLog, uuid: bytes) -> None:
    log.append_new("a", uuid, None, b"v", None)
    disk.write(log.journal or [], log.last_ts)
    log.journal = []


def test_a_write_made_while_an_fsync_is_handed_to_its_thread_is_reported_by_the_next(
    tmp_path: Path,
) -> None:
    """The thread counted bytes written after the fsync was asked as fsynced while the ts
    it reported was the earlier one: no fsync ran again, ts 2 was never reported, and its
    `synced` publish waited forever in an idle group (found in review)."""

    async def main() -> list[int]:
        store, disk, log, seen = setup(tmp_path)
        write(disk, log, b"u1")
        go = threading.Event()
        real_sync = store.sync

        def late() -> int:  # the thread pool picks the job up a little late
            go.wait(5)
            return real_sync()

        store.sync = late  # type: ignore[method-assign]
        task = asyncio.create_task(disk.run(lambda: None))
        disk.sync_soon()
        await asyncio.sleep(0.01)  # ts 1's fsync is in the thread's hands
        write(disk, log, b"u2")  # a `synced` publish of ts 2, on the loop
        disk.sync_soon()
        go.set()
        async with asyncio.timeout(5):
            while not seen or max(seen) < 2:
                await asyncio.sleep(0.01)
        task.cancel()
        return seen

    assert max(asyncio.run(main())) == 2


def test_an_fsync_that_fails_ends_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After EIO the kernel may have dropped the pages: the task died silently, and every
    `synced` publish after it waited forever while `written` ones went on (found in review)."""
    exits: list[int] = []

    def fake_exit(code: int) -> Any:
        exits.append(code)
        raise asyncio.CancelledError  # ends the task as the process would end

    monkeypatch.setattr(disk_module.os, "_exit", fake_exit)

    async def main() -> None:
        store, disk, log, _ = setup(tmp_path)
        write(disk, log, b"u1")

        def eio() -> int:
            raise OSError(5, "Input/output error")

        store.sync = eio  # type: ignore[method-assign]
        task = asyncio.create_task(disk.run(lambda: None))
        disk.sync_soon()
        async with asyncio.timeout(5):
            while not exits:
                await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(main())
    assert exits == [EXIT_STORAGE]


def test_an_fsync_asked_of_files_with_nothing_unsynced_reports_at_once(tmp_path: Path) -> None:
    """A re-led epoch writes nothing and a producer's `synced` retry is a dedup hit: the
    SyncLog found the files clean and started no fsync, so no Synced ever came."""

    async def main() -> list[int]:
        store, disk, log, seen = setup(tmp_path)
        write(disk, log, b"u1")
        task = asyncio.create_task(disk.run(lambda: None))
        disk.sync_soon()
        async with asyncio.timeout(5):
            while not seen:
                await asyncio.sleep(0.01)
        n = len(seen)
        disk.sync_soon()  # nothing written since
        async with asyncio.timeout(5):
            while len(seen) == n:
                await asyncio.sleep(0.01)
        task.cancel()
        return seen

    assert asyncio.run(main())[-1] == 1


def test_a_primary_counts_what_its_files_hold_fsynced_from_its_election() -> None:
    """A new PrimaryCore started at 0 fsynced: a `synced` retry of a record the files held
    fsynced waited for an fsync that a clean store never ran (found in review)."""
    log = GroupLog()
    log.append_replicated(1, [("t", (ts, f"u{ts}".encode(), None, b"v", None)) for ts in (1, 2, 3)])
    c = BrokerCore(
        BrokerConfig(id="a", group="g1", min_insync=1, data_dir="d"), member("a"), log=log
    )
    c.handle(Synced(3, 0.0))  # what recovery read, fsynced
    [prop] = only(c.handle(ZkView(None, {"a": member("a")}, None, 0.0)), ProposeState)
    c.handle(CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=0), 0.0))
    assert c.primary is not None and c.primary.own_synced == 3
