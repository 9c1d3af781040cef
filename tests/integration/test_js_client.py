"""The JavaScript client (clients/js/tritonmq.js, run by Node) against real brokers: a
stream published and consumed through the SIGKILL of the group's primary."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import group_info, wait_new_primary
from tritonmq.devtools.cluster import DevCluster, wait_for

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "js" / "failover_stream.mjs"
NODE = shutil.which("node")


def _node_command() -> list[str]:
    """``node``, with the flag that gives Node 20 its global WebSocket (built in from 22)."""
    assert NODE is not None
    has_ws = subprocess.run(
        [NODE, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"], check=False
    )
    return [NODE] if has_ws.returncode == 0 else [NODE, "--experimental-websocket"]


@pytest.mark.skipif(
    NODE is None, reason="node is not installed: the JavaScript client is not tested"
)
def test_js_stream_survives_primary_sigkill(cluster: DevCluster) -> None:
    """Every record the producer saw acknowledged reaches the consumer exactly once, in
    publish order, though the primary was SIGKILLed mid-stream; both clients reconnect."""
    info = group_info(cluster)
    old = info["primary"]
    url = info["members"][old]  # connect through the primary about to die: the client must move
    total, batch = 600, 10
    proc = subprocess.Popen(
        [*_node_command(), "--no-warnings", str(SCRIPT), url, "js.stream", str(total), str(batch)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(x) for x in proc.stdout or ()))
    reader.start()
    try:
        wait_for(lambda: any(x.get("acked", 0) >= total // 4 for x in lines), 60, "a quarter acked")
        killed_at = max(x.get("acked", 0) for x in list(lines))
        cluster.kill(old)  # SIGKILL, mid-stream
        wait_new_primary(cluster, old)
        proc.wait(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 0, stderr
    result = next(x["result"] for x in lines if "result" in x)
    acked, delivered = result["acked"], result["delivered"]
    assert killed_at < total, "the primary was killed before the stream ended"
    assert result["failed"] == [], result["failed"]
    assert len(acked) == total
    # exactly once, in order: the delivered stream is the acknowledged one, ts ascending
    assert delivered == sorted(acked), (len(delivered), len(acked))
    assert [v for _, v in delivered] == [f"m-{i:06d}" for i in range(total)]
    assert not result["subClosed"], result["subError"]
    # the consumer saw the failover: it lost its connection, came back and resumed exactly
    assert "disconnected" in result["states"] and result["states"][-1] == "connected"
    assert result["subscribed"] and all(e["recovered"] for e in result["subscribed"])
