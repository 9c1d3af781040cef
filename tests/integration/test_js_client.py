"""The JavaScript client (clients/js/tritonmq.js, run by Node) against real brokers: a
stream published and consumed through the SIGKILL of the group's primary."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import group_info, wait_new_primary
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.tokens import mint

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent / "js" / "failover_stream.mjs"
SECURE_SCRIPT = Path(__file__).parent / "js" / "secure_roundtrip.mjs"
PRESENCE_SCRIPT = Path(__file__).parent / "js" / "presence_failover.mjs"
KEY = b"js-client-integration-test-hs256-key-of-64-bytes-0123456789abcdef"
NODE = shutil.which("node")


def _node_command() -> list[str]:
    """``node``, with the flag that gives Node 20 its global WebSocket (built in from 22)."""
    assert NODE is not None
    has_ws = subprocess.run(
        [NODE, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"], check=False
    )
    return [NODE] if has_ws.returncode == 0 else [NODE, "--experimental-websocket"]


def _run_stream(args: list[str], during: Callable[[list[dict[str, Any]]], None]) -> Any:
    """Run a node script that prints JSON lines (progress, then one ``result``); ``during``
    acts on the cluster while it runs, given the lines so far. Returns the result."""
    proc = subprocess.Popen(
        [*_node_command(), "--no-warnings", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(x) for x in proc.stdout or ()))
    reader.start()
    try:
        during(lines)
        proc.wait(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 0, stderr
    return next(x["result"] for x in lines if "result" in x)


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
    killed_at = 0

    def kill_mid_stream(lines: list[dict[str, Any]]) -> None:
        nonlocal killed_at
        wait_for(lambda: any(x.get("acked", 0) >= total // 4 for x in lines), 60, "a quarter acked")
        killed_at = max(x.get("acked", 0) for x in list(lines))
        cluster.kill(old)  # SIGKILL, mid-stream
        wait_new_primary(cluster, old)

    result = _run_stream([str(SCRIPT), url, "js.stream", str(total), str(batch)], kill_mid_stream)
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


@pytest.mark.skipif(
    NODE is None, reason="node is not installed: the JavaScript client is not tested"
)
def test_js_client_over_wss_with_a_token(
    make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    """Against a wss:// broker requiring tokens: a bad token fails connect with
    UNAUTHENTICATED, a good one publishes and reads back, and a topic outside its claims is
    refused with FORBIDDEN (the client's errors carry the broker's codes)."""
    key_file = tmp_path / "auth.key"
    key_file.write_bytes(KEY)
    cluster = make_cluster(
        replicas=1,
        tls=True,
        settings={"replicas": 1, "auth_required": True, "auth_key_file": str(key_file)},
    )
    good = mint(KEY, "alice", pub=["orders*"], read=["orders*"], ttl=600)
    bad = mint(b"another-key-of-at-least-thirty-two-bytes-0123456789", "alice", ttl=600)
    (url,) = cluster.urls
    assert url.startswith("wss://") and cluster.ca_file
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": cluster.ca_file}
    done = subprocess.run(
        [*_node_command(), "--no-warnings", str(SECURE_SCRIPT), url, good, bad],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["bad"] == "UNAUTHENTICATED"
    assert result["ack"]["topic"] == "orders.js" and result["ack"]["ts"] >= 1
    assert result["forbidden"] == "FORBIDDEN"
    assert result["got"] == ["paid"]


@pytest.mark.skipif(
    NODE is None, reason="node is not installed: the JavaScript client is not tested"
)
def test_js_presence_join_leave_and_rebuilt_after_sigkill(cluster: DevCluster) -> None:
    """Alice sees Bob join, leave and join again; after the primary is SIGKILLed the new
    primary lists both again (new client ids), from the clients' resubscriptions."""
    info = group_info(cluster)
    old = info["primary"]
    proc = subprocess.Popen(
        [*_node_command(), "--no-warnings", str(PRESENCE_SCRIPT), info["members"][old], "js.room"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        ready = proc.stdout.readline()
        assert json.loads(ready or "{}").get("ready"), proc.stderr.read() if proc.stderr else ""
        cluster.kill(old)
        wait_new_primary(cluster, old)
        proc.stdin.write("killed\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result = json.loads(out.splitlines()[-1])["result"]
    events = result["events"]
    assert result["listed"] == ["Alice", "Bob"]
    assert [e[:2] for e in events if e[0] in ("join", "leave")][:3] == [
        ["join", "Bob"],
        ["leave", "Bob"],
        ["join", "Bob"],
    ]
    assert ["subscribed", True, True] in events  # resumed, nothing missed
    assert result["members"] == ["Alice", "Bob"]
    assert not set(result["after"]) & set(result["before"]), "the new primary gives new ids"


MOVE_SCRIPT = Path(__file__).parent / "js" / "move_stream.mjs"


@pytest.mark.skipif(
    NODE is None, reason="node is not installed: the JavaScript client is not tested"
)
def test_js_subscriptions_follow_their_topic_across_slot_moves(make_cluster: Any) -> None:
    """Issue 11 (JavaScript): an unnamed and a durable subscription of a topic whose slot
    moves to the other group and back while it is published get every acknowledged record
    exactly once, in publish order; no client is restarted. A third, unnamed with
    ``earliest``, subscribing once all is published, reads every era (M4): the same."""
    from tests.integration.test_slot_moves import cli, histories, topics_in

    c = make_cluster(groups=2, settings={"retention_s": 300.0})
    n = next(i for i, h in enumerate(histories(c)) if h.owner == "g1")
    [topic] = topics_in([n], 1)
    url = group_info(c, "g1")["primary_url"]
    total = 600

    def move_there_and_back(lines: list[dict[str, Any]]) -> None:
        for at, to in ((150, "g2"), (350, "g1")):
            wait_for(lambda at=at: any(x.get("acked", 0) >= at for x in lines), 60, f"{at} acked")
            r = cli(c, "move", str(n), "--to", to)
            assert r.returncode == 0, (r.stdout, r.stderr)

    args = [str(MOVE_SCRIPT), url, topic, str(total), "10", "40"]
    result = _run_stream(args, move_there_and_back)
    assert result["failed"] == [] and result["errors"] == [None, None, None], result
    assert histories(c)[n].era == 2
    want = [f"m-{i:06d}" for i in range(total)]
    assert result["acked"] == want
    assert result["unnamed"] == want, (len(result["unnamed"]), len(set(result["unnamed"])))
    assert result["durable"] == want, (len(result["durable"]), len(set(result["durable"])))
    assert result["late"] == want, (len(result["late"]), len(set(result["late"])))


@pytest.mark.skipif(
    NODE is None, reason="node is not installed: the JavaScript client is not tested"
)
def test_js_clients_ride_through_a_move_rolled_back_after_the_seal(make_cluster: Any) -> None:
    """Issue 11 (JavaScript, roll back): every broker of the new group is frozen, so the
    move stops once the old group sealed the slot; the operator rolls it back and the
    JavaScript producer, refused with WRONG_GROUP meanwhile, comes back to the old group,
    which writes the slot again in era 0; the same move made again completes. The three
    subscriptions get every acknowledged record exactly once, in publish order."""
    from tests.integration.test_slot_moves import cli, histories, topics_in
    from tests.integration.test_slot_rollback import wait_sealed

    c = make_cluster(groups=2, settings={"retention_s": 300.0})
    n = next(i for i, h in enumerate(histories(c)) if h.owner == "g1")
    [topic] = topics_in([n], 1)
    url = group_info(c, "g1")["primary_url"]
    new_group = [bid for bid, b in c.brokers.items() if b.group == "g2"]
    total = 800

    def acked(lines: list[dict[str, Any]], at: int) -> None:
        wait_for(lambda: any(x.get("acked", 0) >= at for x in lines), 60, f"{at} acked")

    def roll_back_then_move(lines: list[dict[str, Any]]) -> None:
        acked(lines, 150)
        for bid in new_group:
            c.kill(bid, signal.SIGSTOP)
        try:
            r = cli(c, "move", str(n), "--to", "g2", "--no-wait")
            assert r.returncode == 0, (r.stdout, r.stderr)
            wait_sealed(c, [n])
            r = cli(c, "roll-back", str(n))
            assert r.returncode == 0, (r.stdout, r.stderr)
        finally:
            for bid in new_group:
                c.kill(bid, signal.SIGCONT)
        assert (histories(c)[n].owner, histories(c)[n].era) == ("g1", 0)
        acked(lines, 300)  # the old group takes the slot's writes again
        c.wait_healthy()
        r = cli(c, "move", str(n), "--to", "g2")
        assert r.returncode == 0, (r.stdout, r.stderr)

    args = [str(MOVE_SCRIPT), url, topic, str(total), "10", "60"]
    result = _run_stream(args, roll_back_then_move)
    assert result["failed"] == [] and result["errors"] == [None, None, None], result
    assert (histories(c)[n].owner, histories(c)[n].era) == ("g2", 1)
    want = [f"m-{i:06d}" for i in range(total)]
    assert result["acked"] == want
    assert result["unnamed"] == want, (len(result["unnamed"]), len(set(result["unnamed"])))
    assert result["durable"] == want, (len(result["durable"]), len(set(result["durable"])))
    assert result["late"] == want, (len(result["late"]), len(set(result["late"])))
