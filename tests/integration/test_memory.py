"""``max_bytes`` bounds what a broker really grows by (issue 8): 1 M empty records were
counted as 30.5 MB against it but cost ~385 MB of the process."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import websockets

from tests.integration.conftest import group_info
from tritonmq.devtools.cluster import DevCluster
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration

MAX_BYTES = 392_000_000  # ~1 M empty records at their real cost
BATCH = 5_000
GIVE_UP_AT = 3_000_000  # records: the old accounting would take ~11 M to say FULL


def rss(pid: int) -> int:
    """Resident set size of ``pid``, bytes (VmRSS in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


async def test_max_bytes_holds_within_20_percent_of_rss_growth_for_1m_tiny_records(
    make_cluster: Callable[..., DevCluster],
) -> None:
    settings = {"replicas": 1, "min_insync": 1, "retention_s": 3600.0, "max_bytes": MAX_BYTES}
    c = make_cluster(replicas=1, settings=settings)
    info = await asyncio.to_thread(group_info, c)
    pid = c.brokers[info["primary"]].pid
    async with websockets.connect(
        info["primary_url"],
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        max_size=None,
    ) as ws:

        async def pub(i: int, n: int) -> dict[str, object]:
            records = [[os.urandom(16), None, b"", None] for _ in range(n)]
            await ws.send(codec.packb({"op": "pub", "id": i, "topic": "tiny", "records": records}))
            return codec.decode_broker(await asyncio.wait_for(ws.recv(), 30))

        assert (await pub(0, 10))["op"] == "puback"  # connection and topic exist
        before = rss(pid)
        sent = 0
        full = None
        while sent < GIVE_UP_AT and rss(pid) - before < 2 * MAX_BYTES:
            got = await pub(sent // BATCH + 1, BATCH)
            if got["op"] == "error":
                full = got
                break
            assert got["op"] == "puback", got
            sent += BATCH
        growth = rss(pid) - before
    assert full is not None, f"no FULL after {sent} records, RSS grew {growth / 1e6:.0f} MB"
    assert full["code"] == "FULL", full
    assert sent >= 900_000, f"FULL after {sent} records only"
    assert abs(growth - MAX_BYTES) <= 0.2 * MAX_BYTES, (
        f"max_bytes={MAX_BYTES / 1e6:.0f} MB but RSS grew {growth / 1e6:.0f} MB for {sent} records"
    )
