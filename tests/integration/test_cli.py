"""The `tritonmq` command as a user runs it: real processes, real signals, exit statuses."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import process_gone
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster, wait_for

pytestmark = pytest.mark.integration
TRITONMQ = [sys.executable, "-m", "tritonmq"]


def run(
    *args: str, timeout: float = 60, input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRITONMQ, *args], capture_output=True, text=input is None, timeout=timeout, input=input
    )  # type: ignore[call-overload,no-any-return]


def test_dev_status_pub_sub_and_clean_stop(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    config = tmp_path / "broker.toml"
    config.write_text("[broker]\nretention_s = 300.0\n")  # replay below needs records kept
    dev = subprocess.Popen(
        [*TRITONMQ, "dev", "--port", "0", "--state-file", str(state_file), "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(state_file.exists, 60, "the dev cluster's state file")
        state = json.loads(state_file.read_text())
        assert {b["group"] for b in state["brokers"]} == {"g1"} and len(state["brokers"]) == 3
        zk = state["zk"]

        st = run("status", "--zk", zk, "--json")
        assert st.returncode == 0, st.stderr
        g1 = json.loads(st.stdout)["groups"]["g1"]
        assert (
            g1["epoch"] >= 1
            and g1["primary"] in g1["members"]
            and sorted(g1["isr"]) == sorted(g1["members"])
        )
        table = run("status", "--zk", zk)
        assert table.returncode == 0 and "g1" in table.stdout

        published = run("pub", "--zk", zk, "greetings", "hello world")
        assert published.returncode == 0, published.stderr
        ts = int(published.stdout.split("ts=")[1].split()[0])
        lines = run("pub", "--zk", zk, "greetings", "-", input=b"one\ntwo\n")
        assert lines.returncode == 0 and lines.stdout.count(b"ts=") == 2

        got = run("sub", "--zk", zk, "greetings", "--from", "earliest", "--count", "3")
        assert got.returncode == 0, got.stderr
        assert got.stdout.splitlines() == [f"{ts}\thello world", f"{ts + 1}\tone", f"{ts + 2}\ttwo"]
    finally:
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=60) == 0
    for b in state["brokers"]:
        assert process_gone(b["pid"]), f"broker {b['id']} outlived the dev cluster"


@pytest.mark.parametrize(
    "args",
    [
        ["sub", "t", "--from", "yesterday"],
        ["broker", "--listen", "nonsense"],
        ["broker", "--config", "does-not-exist.toml"],
        ["broker", "--session-timeout", "0.01"],
        ["dev", "--groups", "0"],
        ["pub", "t", "v", "--url", "zk://a:1", "--zk", "a:1"],
        ["no-such-command"],
        ["init", "--groups", " , "],
        ["sub", "t", "--mode", "shared"],
    ],
)
def test_bad_input_exits_2_with_a_message(args: list[str]) -> None:
    r = run(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Error" in r.stderr and "Traceback" not in r.stderr


def test_bad_config_value_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "b.toml"
    cfg.write_text('[broker]\nreplicas = "three"\n')
    r = run("broker", "--config", str(cfg))
    assert r.returncode == 2 and "replicas" in r.stderr


def test_zk_command_serves_until_sigterm() -> None:
    p = subprocess.Popen([*TRITONMQ, "zk"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        hostport = p.stdout.readline().strip()
        host, port = hostport.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=hostport)
        zk.start(timeout=10)
        zk.create("/hello", b"x")
        assert zk.get("/hello")[0] == b"x"
        zk.stop()
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0


def test_bench_writes_the_promised_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    r = run(
        "bench",
        "--records",
        "5000",
        "--seconds",
        "1",
        "--rate",
        "2000",
        "--json",
        str(out),
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    for key in ("publish_acked_msgs_per_s", "e2e_msgs_per_s", "latency_p50_us", "latency_p99_us"):
        assert data[key] > 0, key
    assert data["latency_p50_us"] <= data["latency_p99_us"]


def test_bench_groups_acknowledges_every_record_with_each_group_count(tmp_path: Path) -> None:
    out = tmp_path / "groups.json"
    args = ["--groups", "1,2", "--records", "300", "--producers", "2", "--json", str(out)]
    r = run("bench", *args, timeout=240)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert (data["records"], data["topics"], data["producers"], data["replicas"]) == (
        300,
        64,
        2,
        3,
    )
    assert [(x["groups"], x["brokers"], x["acked"]) for x in data["runs"]] == [
        (1, 3, 300),
        (2, 6, 300),
    ]
    assert data["runs"][1]["topics_per_group"] == {"g1": 32, "g2": 32}  # over all slots
    assert all(x["msgs_per_s"] > 0 for x in data["runs"])
    assert "acknowledged" in r.stdout


def test_init_creates_the_slot_map_once(zk_server: object) -> None:
    hostport = zk_server.hostport  # type: ignore[attr-defined]
    first = run(
        "init", "--zk", hostport, "--chroot", "/cli-init", "--groups", "g1,g2", "--slots", "8"
    )
    assert first.returncode == 0 and first.stdout.strip() == "8 slots: g1 4, g2 4"
    again = run("init", "--zk", hostport, "--chroot", "/cli-init", "--groups", "g9")
    assert again.returncode == 0 and again.stdout.strip() == "8 slots: g1 4, g2 4"


def test_subscriptions_shows_each_durable_subscriptions_lag(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=2)
    url = f"zk://{c.zk_hosts}{c.chroot}"

    async def commit_then_publish() -> int:
        async with Client(url) as client:
            await client.commit("lagging", "spark-q", 0)
            acks = await client.publish_many("lagging", [b"x"] * 10)
            await client.commit("lagging", "spark-q", acks[3].ts)
            return acks[-1].ts

    last = asyncio.run(commit_then_publish())
    out = run("subscriptions", "--zk", str(c.zk_hosts), "--chroot", c.chroot, "--json")
    assert out.returncode == 0, out.stderr

    def lag() -> dict[str, object] | None:
        out = run("subscriptions", "--zk", str(c.zk_hosts), "--chroot", c.chroot, "--json")
        [sub] = json.loads(out.stdout)
        return sub if sub["offset"] == last - 6 else None  # the offset is stored coalesced

    sub = wait_for(lag, 30, "the committed offset to be stored")
    assert sub["topic"] == "lagging" and sub["name"] == "spark-q" and sub["group"] == "g1"
    assert sub["head"] == last and sub["lag"] == 6


def test_a_broker_that_cannot_reach_zookeeper_says_it_waits_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """Issue 26: it waits for ZooKeeper (it exited 1 before: a broker started during an
    outage never came up); a SIGTERM meanwhile stops it cleanly."""
    import signal
    import subprocess
    import threading

    cfg = tmp_path / "b.toml"
    cfg.write_text("[broker]\ninsecure_cluster = true\n")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["broker", "--zk", f"127.0.0.1:{port}", "--listen", "127.0.0.1:0", "--config", str(cfg)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tritonmq", *args], stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    waits = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "waiting for ZooKeeper" in line:
                waits.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert waits.wait(60), "".join(lines)
        assert proc.poll() is None, "".join(lines)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in "".join(lines)
