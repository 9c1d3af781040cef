"""The operator CLI (tritonmq/cli_ops.py) as an operator runs it, against a real cluster:
`topics`, `subscriptions [TOPIC]`, `subscriptions delete|reset`, `top --once`, and the
exit status 2 of a bad argument or an unreachable cluster."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import websockets

from tests.integration.conftest import SHOWABLE_TRITONMQ, show_and_kill, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.tokens import mint
from tritonmq.wire import subprotocols
from tritonmq.wire.frames import Error, Stats, StatsReply

pytestmark = pytest.mark.integration
TRITONMQ = [sys.executable, "-m", "tritonmq"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TRITONMQ, *args], capture_output=True, text=True, timeout=60)


def at(c: DevCluster) -> tuple[str, ...]:
    return ("--zk", str(c.zk_hosts), "--chroot", c.chroot)


def rows(c: DevCluster, *args: str) -> Any:
    out = cli(*args, *at(c), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def row(c: DevCluster, command: str, topic: str, name: str | None = None) -> dict[str, Any]:
    """The row of ``topic`` (and subscription ``name``) in ``tritonmq COMMAND --json``."""
    found = [
        r for r in rows(c, command) if r["topic"] == topic and (name is None or r["name"] == name)
    ]
    assert len(found) == 1, found
    return found[0]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_topics_and_subscriptions_show_retained_records_and_lag(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=2)

    async def commit_then_publish() -> list[int]:
        async with Client(zk_url(c)) as client:
            await client.commit("orders", "billing", 0)  # registered: holds what follows
            acks = await client.publish_many("orders", [b"o"] * 10)
            await client.commit("orders", "billing", acks[3].ts)
            other = await client.publish("other", b"nobody reads this")  # purged at once
            return [a.ts for a in acks] + [other.ts]

    *ts, other = run(commit_then_publish())

    def billing_stored() -> dict[str, Any] | None:
        r = row(c, "subscriptions", "orders", "billing")
        return r if r["stored"] == ts[3] else None  # the offset is written coalesced

    sub = wait_for(billing_stored, 30, "billing's offset to reach ZooKeeper", interval=0.2)
    assert (sub["mode"], sub["group"], sub["offset"], sub["head"]) == (
        "broadcast",
        "g1",
        ts[3],
        other,  # the group's commit point: ts are shared by its topics
    )
    assert sub["lag"] == 6 and sub["lag_s"] >= 0 and sub["consumers"] == 0
    assert sub["owner"] is None  # the anonymous principal of a dev cluster

    def orders_purged_to_the_offset() -> dict[str, Any] | None:
        r = row(c, "topics", "orders")
        return r if r["records"] == 6 else None  # what billing has acknowledged is gone

    orders = wait_for(orders_purged_to_the_offset, 30, "the acknowledged records to be purged")
    assert (orders["group"], orders["first_ts"], orders["last_ts"]) == ("g1", ts[4], ts[-1])
    assert orders["subscriptions"] == 1 and orders["bytes"] > 0 and orders["slot"] is not None
    assert orders["rate"] >= 0 and orders["last_publish_ms"] > 0

    only = rows(c, "subscriptions", "orders")
    assert [r["name"] for r in only] == ["billing"]
    assert rows(c, "subscriptions", "other") == []
    [one] = rows(c, "topics", "orders")
    assert one["topic"] == "orders" and one["records"] == 6

    table = cli("subscriptions", *at(c))
    assert table.returncode == 0, table.stderr
    assert "billing" in table.stdout and "orders" in table.stdout
    listed = cli("subscriptions", "list", "orders", *at(c))  # `list` spelled out
    assert listed.returncode == 0 and "billing" in listed.stdout
    table = cli("topics", *at(c))
    assert table.returncode == 0 and "orders" in table.stdout


def test_a_dry_run_reset_changes_nothing_and_an_executed_one_replays(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=2, settings={"retention_s": 300.0})
    url = zk_url(c)

    async def consume_all() -> list[int]:
        async with Client(url) as client:
            acks = await client.publish_many("audit", [b"a", b"b", b"c", b"d"])
            async with client.subscribe("audit", "reader", "earliest") as sub:
                for _ in acks:
                    await (await sub.get(timeout=10)).ack()
            return [a.ts for a in acks]

    async def next_for_reader() -> int:
        """What a reconnecting `reader` gets first (without acknowledging it)."""
        async with Client(url) as client:
            await client.publish("audit", b"new")
            async with client.subscribe("audit", "reader", "latest") as sub:
                return (await sub.get(timeout=10)).ts

    ts = run(consume_all())
    wait_for(
        lambda: row(c, "subscriptions", "audit", "reader")["offset"] == ts[-1],
        30,
        "reader to have acknowledged everything",
        interval=0.2,
    )
    dry = cli("subscriptions", "reset", "audit", "reader", "--to", "earliest", *at(c))
    assert dry.returncode == 0, dry.stderr
    assert "DRY RUN" in dry.stdout and "nothing changed" in dry.stdout
    assert row(c, "subscriptions", "audit", "reader")["offset"] == ts[-1]
    assert run(next_for_reader()) > ts[-1], "a dry run changes nothing"

    done = cli("subscriptions", "reset", "audit", "reader", "--to", str(ts[1]), "--execute", *at(c))
    assert done.returncode == 0 and done.stdout.startswith("reset"), done.stderr
    assert row(c, "subscriptions", "audit", "reader")["offset"] == ts[0]
    assert run(next_for_reader()) == ts[1], "the reconnecting subscriber replays from --to"


def test_after_a_delete_the_topic_s_records_are_purged(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=2)
    target = at(c)

    async def hold_records() -> None:
        async with Client(zk_url(c)) as client:
            await client.commit("logs", "archiver", 0)
            await client.publish_many("logs", [b"l"] * 5)

    run(hold_records())
    wait_for(lambda: row(c, "topics", "logs")["records"] == 5, 30, "5 retained records")
    dry = cli("subscriptions", "delete", "logs", "archiver", *target)
    assert dry.returncode == 0 and "DRY RUN" in dry.stdout, dry.stderr
    assert row(c, "subscriptions", "logs", "archiver")["lag"] == 5
    assert row(c, "topics", "logs")["records"] == 5, "a dry run holds the records still"

    done = cli("subscriptions", "delete", "logs", "archiver", "--execute", *target)
    assert done.returncode == 0 and done.stdout.startswith("deleted"), done.stderr

    def purged() -> bool:
        return all(r["topic"] != "logs" or r["records"] == 0 for r in rows(c, "topics"))

    wait_for(purged, 30, "the deleted subscription's records to be purged", interval=0.2)
    assert all(r["name"] != "archiver" for r in rows(c, "subscriptions"))


def test_top_once_shows_each_group_s_primary_epoch_and_isr(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(groups=2, replicas=2)
    status = c.status()["groups"]
    out = rows(c, "top", "--once")
    groups = {g["group"]: g for g in out["groups"]}
    assert sorted(groups) == ["g1", "g2"]
    for name, g in groups.items():
        assert g["primary"] == status[name]["primary"] and g["epoch"] == status[name]["epoch"]
        assert sorted(g["isr"]) == sorted(status[name]["isr"]) and g["answered"]
        assert g["failovers_seen"] == 0 and g["records"] == 0
    frame = cli("top", "--once", *at(c))
    assert frame.returncode == 0, frame.stderr
    for name in ("g1", "g2"):
        assert name in frame.stdout and status[name]["primary"] in frame.stdout


def test_top_counts_the_failover_it_watches_and_stops_on_ctrl_c(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=2)
    old = c.primary()
    assert old is not None
    top = subprocess.Popen(
        [*SHOWABLE_TRITONMQ, "top", *at(c), "--interval", "0.5", "--timeout", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(top.stdout.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(lambda: "failovers seen: 0" in "".join(seen), 30, "top's first frame")
        c.kill(old)  # SIGKILL: a backup takes over after the session timeout
        new = wait_new_primary(c, old)
        wait_for(lambda: "failovers seen: 1" in "".join(seen), 30, "top to see the failover")
        text = "".join(seen)
        assert f"g1: primary {old} -> {new}" in text
        top.send_signal(signal.SIGINT)
        try:
            assert top.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            pytest.fail(f"top did not stop 30 s after Ctrl-C:\n{show_and_kill(top)}")
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
        reader.join(timeout=10)


def test_stats_need_an_admin_token_without_one_zookeeper_s_figures_are_shown(
    make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    key = b"cli-ops-test-hs256-key-of-at-least-32-bytes-0123456789"
    (tmp_path / "auth.key").write_bytes(key)
    c = make_cluster(
        replicas=1,
        settings={
            "replicas": 1,
            "auth_required": True,
            "auth_key_file": str(tmp_path / "auth.key"),
        },
    )
    alice = mint(key, "alice", pub=["orders"], read=["orders"], names=["alice.*"])
    admin = tmp_path / "ops.token"
    admin.write_text(mint(key, "ops", admin=True))
    user = tmp_path / "alice.token"
    user.write_text(alice)

    async def publish() -> None:
        async with Client(zk_url(c), token=alice) as client:
            await client.commit("orders", "alice.app", 0)
            await client.publish_many("orders", [b"o"] * 3)

    run(publish())
    as_admin = rows(c, "subscriptions", "--token-file", str(admin))
    [app] = [r for r in as_admin if r["name"] == "alice.app"]
    assert app["owner"] == "alice" and app["lag"] == 3 and app["consumers"] == 0

    refused = cli("subscriptions", *at(c), "--json", "--token-file", str(user))
    assert refused.returncode == 0, refused.stderr
    assert "FORBIDDEN" in refused.stderr and "admin" in refused.stderr
    [app] = [r for r in json.loads(refused.stdout) if r["name"] == "alice.app"]
    assert app["owner"] == "alice" and app["lag"] is None  # ZooKeeper's figures only
    anonymous = cli("topics", *at(c), "--json")
    assert anonymous.returncode == 0 and "UNAUTHENTICATED" in anonymous.stderr


def test_a_malformed_stats_request_gets_bad_frame_and_the_connection_is_still_served(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=1, settings={"replicas": 1})
    url = c.status()["groups"]["g1"]["primary_url"]

    async def ask() -> None:
        for codec in (subprotocols.MSGPACK, subprotocols.JSON):
            async with websockets.connect(url, subprotocols=[codec.subprotocol]) as ws:  # type: ignore[list-item]
                bad = {"op": "stats", "id": 7, "topic": 42}
                await ws.send(json.dumps(bad) if codec is subprotocols.JSON else msgpack.packb(bad))
                err = codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))
                assert isinstance(err, Error) and (err.code, err.id) == ("BAD_FRAME", 7)
                await ws.send(codec.encode(Stats(8)))
                got = codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))
                assert isinstance(got, StatsReply) and (got.id, got.role) == (8, "primary")

    run(ask())


def test_bad_arguments_and_an_unreachable_cluster_exit_2_with_a_message(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=1, settings={"replicas": 1})
    bad_to = cli("subscriptions", "reset", "t", "s", "--to", "soon", "--zk", str(c.zk_hosts))
    assert bad_to.returncode == 2 and "--to" in bad_to.stderr
    superscript = cli("subscriptions", "reset", "t", "s", "--to", "²")  # str.isdigit() says yes
    assert superscript.returncode == 2 and "--to" in superscript.stderr, superscript.stderr
    assert "Traceback" not in superscript.stderr
    missing = cli("subscriptions", "delete", "t")
    assert missing.returncode == 2 and "NAME" in missing.stderr
    bad_timeout = cli("topics", *at(c), "--timeout", "0")
    assert bad_timeout.returncode == 2 and "--timeout" in bad_timeout.stderr
    bad_interval = cli("top", *at(c), "--interval", "0")
    assert bad_interval.returncode == 2 and "--interval" in bad_interval.stderr
    for command in ("topics", "subscriptions", "top"):
        args = [command, "--zk", "127.0.0.1:1", "--timeout", "1"]
        if command == "top":
            args.append("--once")
        gone = cli(*args)
        assert gone.returncode == 2 and "cannot reach ZooKeeper" in gone.stderr, (
            command,
            gone.stderr,
        )
    relative = cli("subscriptions", "--zk", str(c.zk_hosts), "--chroot", "tritonmq")
    assert relative.returncode == 2 and "--chroot" in relative.stderr
    empty = cli("topics", "--zk", str(c.zk_hosts), "--chroot", "/nothing-here")
    assert empty.returncode == 2 and "no broker group" in empty.stderr
