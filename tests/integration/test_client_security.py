"""Issue 8, clients: tokens, authorization, admin ops and Origin, against real broker
processes. Each attack fails for the attacker while a well-behaved client on the same broker
keeps getting acknowledgements."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.client import SyncClient
from tritonmq.coord.zkclient import new_client
from tritonmq.devtools.cluster import DevCluster
from tritonmq.errors import Forbidden, RequestRejected, TokenExpired, Unauthenticated
from tritonmq.tokens import mint
from tritonmq.wire import codec, subprotocols
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration
TRITONMQ = [sys.executable, "-m", "tritonmq"]
KEY = b"integration-test-hs256-key-of-64-bytes-0123456789abcdef0123456789"
TOPIC = "orders"


def alice_token(ttl: float = 600.0) -> str:
    return mint(KEY, "alice", pub=["orders*"], read=["orders*"], names=["alice.*"], ttl=ttl)


def mallory_token() -> str:
    # mallory may read the topic, and names every subscription but alice's rightful prefix
    return mint(KEY, "mallory", pub=["*"], read=["*"], names=["mallory.*", "alice.app"])


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    f = tmp_path / "auth.key"
    f.write_bytes(KEY)
    return f


@pytest.fixture
def secured(make_cluster: Callable[..., DevCluster], key_file: Path) -> DevCluster:
    """One broker that requires tokens, keeping records 5 minutes."""
    return make_cluster(
        replicas=1,
        settings={
            "replicas": 1,
            "auth_required": True,
            "auth_key_file": str(key_file),
            "retention_s": 300.0,
        },
    )


async def until(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def well_behaved(url: str, *, anonymous: bool = False) -> AsyncIterator[list[int]]:
    """Alice (or anyone, on a broker without tokens) publishing to TOPIC all along; the list
    holds the ts of every acknowledgement."""
    acked: list[int] = []
    async with Client(url, token=None if anonymous else alice_token()) as c:

        async def keep_publishing() -> None:
            i = 0
            while True:
                acked.append((await c.publish(TOPIC, f"ok-{i}".encode())).ts)
                i += 1
                await asyncio.sleep(0.02)

        task = asyncio.create_task(keep_publishing())
        try:
            await until(lambda: len(acked) >= 3, 20, "the well-behaved client's first acks")
            yield acked
            before = len(acked)
            await until(lambda: len(acked) >= before + 5, 20, "acks after the attacks")
            assert not task.done(), task
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def raw(url: str, *frames: dict[str, Any], origin: str | None = None) -> list[Any]:
    """Send ``frames`` on one plain websocket connection; the decoded answer to each."""
    async with websockets.connect(
        url,
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        origin=origin,  # type: ignore[arg-type]
    ) as ws:
        out = []
        for f in frames:
            await ws.send(codec.packb(f))
            out.append(subprotocols.MSGPACK.decode_broker(await asyncio.wait_for(ws.recv(), 10)))
        return out


def pub_frame(id: int) -> dict[str, Any]:
    return {"op": "pub", "id": id, "topic": TOPIC, "records": [[os.urandom(16), None, b"x", None]]}


async def test_a_token_required_broker_refuses_anonymous_and_expired_tokens_and_takes_a_refresh(
    secured: DevCluster,
) -> None:
    url = zk_url(secured)
    [ws_url] = secured.urls
    async with well_behaved(url):
        # anonymous: the handshake's hello and every request are refused, typed
        hello, pub, meta = await raw(ws_url, {"op": "hello"}, pub_frame(1), {"op": "meta", "id": 2})
        assert (hello.code, pub.code, pub.id, meta.code) == (
            "UNAUTHENTICATED",
            "UNAUTHENTICATED",
            1,
            "UNAUTHENTICATED",
        )
        [forged] = await raw(ws_url, {"op": "hello", "token": mint(b"not-the-key" * 4, "alice")})
        assert forged.code == "UNAUTHENTICATED" and "Signature" in forged.message
        async with Client(url, timeout=5) as anonymous:
            with pytest.raises(Unauthenticated):
                await anonymous.publish(TOPIC, b"no token")
        with pytest.raises(Unauthenticated):  # ws://: the broker answers meta to no one else
            await Client(ws_url, timeout=5).connect()
        async with Client(ws_url, token=alice_token(), timeout=5) as direct:
            assert (await direct.publish(TOPIC, b"over ws:// with a token")).ts > 0
        async with Client(url, token=alice_token(ttl=-5), timeout=5) as expired:
            with pytest.raises(TokenExpired):
                await expired.publish(TOPIC, b"expired token")

        # one live connection: its token expires, a fresh hello on it refreshes it
        short = alice_token(ttl=4)
        first, ok = await raw(ws_url, {"op": "hello", "token": short}, pub_frame(3))
        assert first.role == "primary" and ok.id == 3
        async with websockets.connect(ws_url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]

            async def ask(frame: dict[str, Any]) -> Any:
                await ws.send(codec.packb(frame))
                return subprotocols.MSGPACK.decode_broker(await asyncio.wait_for(ws.recv(), 10))

            assert (await ask({"op": "hello", "token": short})).role == "primary"
            assert (await ask(pub_frame(4))).id == 4
            exp = json.loads(_claims(short))["exp"]
            await until(lambda: time.time() > exp + 0.2, 10, "the short token to expire")
            refused = await ask(pub_frame(5))
            assert (refused.code, refused.id) == ("TOKEN_EXPIRED", 5)
            assert (await ask({"op": "hello", "token": alice_token()})).role == "primary"
            assert (await ask(pub_frame(6))).id == 6, "the same connection works again"

        # the same through the client API: refresh_token on a live client
        short = alice_token(ttl=4)
        async with Client(url, token=short, timeout=5) as c:
            assert (await c.publish(TOPIC, b"fresh")).ts > 0  # connected, token valid
            exp = json.loads(_claims(short))["exp"]
            await until(lambda: time.time() > exp + 0.2, 10, "the short token to be expired")
            with pytest.raises(TokenExpired):
                await c.publish(TOPIC, b"late")
            c.refresh_token(alice_token())
            ack = await c.publish(TOPIC, b"refreshed")
            assert ack.ts > 0

        def sync_client_refreshes() -> int:
            with SyncClient(url, token=alice_token(ttl=-5), timeout=5) as sc:
                with pytest.raises(TokenExpired):
                    sc.publish(TOPIC, b"expired")
                sc.refresh_token(alice_token())
                return sc.publish(TOPIC, b"refreshed").ts

        assert await asyncio.to_thread(sync_client_refreshes) > 0


def _claims(token: str) -> str:
    import base64

    body = token.split(".")[1]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


async def test_hijacking_locking_and_jumping_another_principals_subscription_fail(
    secured: DevCluster,
) -> None:
    url = zk_url(secured)
    async with well_behaved(url) as acked:
        async with Client(url, token=alice_token()) as alice:
            got: list[int] = []
            async with alice.subscribe(TOPIC, "alice.app", "earliest") as sub:
                msg = await sub.get(timeout=10)
                await msg.ack()
                got.append(msg.ts)
            async with Client(url, token=mallory_token(), timeout=5) as mallory:
                # hijack: alice's durable subscription, either mode, and its commit
                for mode in ("broadcast", "shared"):
                    with pytest.raises(Forbidden):
                        async with mallory.subscribe(TOPIC, "alice.app", mode=mode) as s:
                            await s.get(timeout=10)
                with pytest.raises(Forbidden):
                    await mallory.commit(TOPIC, "alice.app", 2**40)
                # lock: registering one of alice's names first, as shared, is not allowed
                with pytest.raises(Forbidden):
                    async with mallory.subscribe(TOPIC, "alice.other", mode="shared") as s:
                        await s.get(timeout=10)
            # jump: even its owner cannot start an existing subscription past the commit point
            # (2**53 - 1 is the largest integer the wire carries; 2**63 is a BAD_FRAME)
            for far, code in ((2**53 - 1, "BAD_REQUEST"), (2**63, "BAD_FRAME")):
                with pytest.raises(RequestRejected) as jump:
                    async with alice.subscribe(TOPIC, "alice.app", far) as s:
                        await s.get(timeout=10)
                assert jump.value.code == code
            # alice's subscription is where she left it: the next record is the one after hers
            async with alice.subscribe(TOPIC, "alice.app", "latest") as sub:
                msg = await sub.get(timeout=10)
                assert msg.ts == min(t for t in acked if t > got[0])
            # and the broadcast name mallory tried to lock is alice's to use
            async with alice.subscribe(TOPIC, "alice.other", "earliest") as sub:
                assert (await sub.get(timeout=10)).ts > 0
    owner = _subscription_node(secured, TOPIC, "alice.app")
    assert owner == {"mode": "broadcast", "owner": "alice"}


def _subscription_node(c: DevCluster, topic: str, name: str) -> dict[str, Any] | None:
    zk = new_client(str(c.zk_hosts), auth=c.zk_auth)  # subscriptions are the cluster's alone
    zk.start(timeout=10)
    try:
        raw_data, _ = zk.get(f"{c.chroot}/subscriptions/{topic}/{name}")
        return dict(json.loads(raw_data))
    except Exception:
        return None
    finally:
        zk.stop()
        zk.close()


async def test_an_origin_not_allowed_is_refused_at_the_handshake(
    make_cluster: Callable[..., DevCluster],
) -> None:
    listed = make_cluster(
        replicas=1, settings={"replicas": 1, "allowed_origins": ["https://app.example"]}
    )
    [url] = listed.urls
    async with well_behaved(zk_url(listed), anonymous=True):
        with pytest.raises(InvalidStatus) as refused:
            await raw(url, {"op": "hello"}, origin="https://evil.example")
        assert refused.value.response.status_code == 403
        [ok] = await raw(url, {"op": "hello"}, origin="https://app.example")
        assert ok.role == "primary"
        [no_origin] = await raw(url, {"op": "hello"})  # not a browser
        assert no_origin.role == "primary"
    same_only = make_cluster(replicas=1, settings={"replicas": 1})  # default: same origin only
    [url] = same_only.urls
    hostport = url.removeprefix("ws://")
    async with well_behaved(zk_url(same_only), anonymous=True):
        [ok] = await raw(url, {"op": "hello"}, origin=f"http://{hostport}")
        assert ok.role == "primary"
        with pytest.raises(InvalidStatus) as refused:
            await raw(url, {"op": "hello"}, origin="https://evil.example")
        assert refused.value.response.status_code == 403


async def test_a_page_served_by_another_broker_of_the_cluster_may_connect(
    make_cluster: Callable[..., DevCluster],
) -> None:
    # Every broker serves the chat page; the page then connects to its room's primary,
    # usually another broker, which must take it although it is not the page's origin.
    c = make_cluster(replicas=3)  # default allowed_origins: same origin only
    primary = group_info(c)["primary"]
    backup = next(b for b in c.brokers.values() if b.id != primary)
    page_origin = backup.url.replace("ws://", "http://", 1)
    url = c.brokers[primary].url

    async def hello() -> Any:
        try:
            [reply] = await raw(url, {"op": "hello"}, origin=page_origin)
            return reply
        except InvalidStatus:
            return None  # not yet: the primary learns the cluster's brokers within seconds

    deadline = time.monotonic() + 30
    while (reply := await hello()) is None:
        assert time.monotonic() < deadline, "the primary refused a page its backup served"
        await asyncio.sleep(0.2)
    assert reply.role == "primary"
    with pytest.raises(InvalidStatus) as refused:
        await raw(url, {"op": "hello"}, origin=page_origin.rsplit(":", 1)[0] + ":1")
    assert refused.value.response.status_code == 403


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRITONMQ, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


async def run_cli(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(cli, *args, env=env)


async def test_admin_delete_and_reset_through_the_cli_dry_run_then_execute(
    secured: DevCluster, tmp_path: Path, key_file: Path
) -> None:
    url = zk_url(secured)
    admin_file = tmp_path / "admin.token"
    minted = await run_cli(
        "token", "--key-file", str(key_file), "--sub", "ops", "--admin", "--ttl", "600"
    )
    assert minted.returncode == 0, minted.stderr
    admin_file.write_text(minted.stdout)
    as_admin = ("--url", url, "--token-file", str(admin_file))
    async with well_behaved(url) as acked:
        async with Client(url, token=alice_token()) as alice:
            async with alice.subscribe(TOPIC, "alice.app", "earliest") as sub:
                for _ in range(3):
                    await (await sub.get(timeout=10)).ack()
                first = min(acked)
                # while alice is connected, an --execute is refused (Kafka: group not empty)
                busy = await run_cli(
                    "subscription",
                    "reset",
                    TOPIC,
                    "alice.app",
                    "--to",
                    "earliest",
                    "--execute",
                    *as_admin,
                )
                assert busy.returncode == 1 and "connected consumer" in busy.stderr
            # a non-admin cannot even dry-run
            denied = await run_cli(
                "subscription",
                "delete",
                TOPIC,
                "alice.app",
                "--url",
                url,
                env={"TRITONMQ_TOKEN": alice_token()},
            )
            assert denied.returncode == 1 and "FORBIDDEN" in denied.stderr

            dry = await run_cli(
                "subscription", "reset", TOPIC, "alice.app", "--to", "earliest", *as_admin
            )
            assert dry.returncode == 0 and "DRY RUN" in dry.stdout and "owner alice" in dry.stdout
            async with alice.subscribe(TOPIC, "alice.app", "latest") as sub:
                msg = await sub.get(timeout=10)
                assert msg.ts > first, "a dry run changes nothing"
            done = await run_cli(
                "subscription",
                "reset",
                TOPIC,
                "alice.app",
                "--to",
                "earliest",
                "--execute",
                *as_admin,
            )
            assert done.returncode == 0 and done.stdout.startswith("reset"), done.stderr
            async with alice.subscribe(TOPIC, "alice.app", "latest") as sub:
                assert (await sub.get(timeout=10)).ts == first, "replays from the earliest"

            listed = await run_cli(
                "subscriptions", "--zk", str(secured.zk_hosts), "--chroot", secured.chroot, "--json"
            )
            assert listed.returncode == 0, listed.stderr
            [row] = [r for r in json.loads(listed.stdout) if r["name"] == "alice.app"]
            assert row["owner"] == "alice"
            dry = await run_cli("subscription", "delete", TOPIC, "alice.app", *as_admin)
            assert dry.returncode == 0 and "DRY RUN" in dry.stdout
            assert _subscription_node(secured, TOPIC, "alice.app") is not None
            done = await run_cli(
                "subscription", "delete", TOPIC, "alice.app", "--execute", *as_admin
            )
            assert done.returncode == 0 and done.stdout.startswith("deleted"), done.stderr
            await until(
                lambda: _subscription_node(secured, TOPIC, "alice.app") is None,
                10,
                "the subscription to leave ZooKeeper",
            )
            gone = await run_cli("subscription", "delete", TOPIC, "alice.app", *as_admin)
            assert gone.returncode == 1 and "BAD_REQUEST" in gone.stderr
            bad = await run_cli(
                "subscription", "reset", TOPIC, "alice.app", "--to", "soon", *as_admin
            )
            assert bad.returncode == 2 and "--to" in bad.stderr


async def test_jumping_a_subscription_fails_on_an_anonymous_dev_broker_too(
    make_cluster: Callable[..., DevCluster],
) -> None:
    """Attack 4's jump needs no token: ``from = 2**63`` (now ``2**53 - 1``, the wire's largest) on someone's durable subscription,
    then leave, used to move its offset past everything (its backlog purged, never
    delivered again)."""
    dev = make_cluster(replicas=1, settings={"replicas": 1})
    url = zk_url(dev)
    async with well_behaved(url, anonymous=True) as acked, Client(url) as app:
        async with app.subscribe(TOPIC, "billing", "earliest") as sub:
            first = await sub.get(timeout=10)
            await first.ack()
        async with Client(url, timeout=5) as attacker:
            with pytest.raises(RequestRejected) as jump:
                async with attacker.subscribe(TOPIC, "billing", 2**53 - 1) as s:
                    await s.get(timeout=10)
            assert jump.value.code == "BAD_REQUEST" and "commit point" in str(jump.value)
        async with app.subscribe(TOPIC, "billing", "latest") as sub:
            assert (await sub.get(timeout=10)).ts == min(t for t in acked if t > first.ts)


async def test_spark_reads_and_writes_a_token_required_broker_with_token_file(
    secured: DevCluster, tmp_path: Path
) -> None:
    """What Spark's driver and executors use with option tokenFile (no Spark needed here)."""
    from tritonmq.spark.remote import forget, remote

    token_file = tmp_path / "spark.token"
    token_file.write_text(
        mint(KEY, "spark", pub=["spark-*"], read=["spark-*"], names=["spark-*"]) + "\n"
    )
    url = zk_url(secured)

    def use() -> list[bytes]:
        r = remote(url, None, str(token_file))
        try:
            records = [(bytes([i]) * 16, f"v{i}".encode(), None, None) for i in range(20)]
            assert r.publish("spark-in", records) == 20
            head = r.heads([r.groups_of(["spark-in"])["spark-in"]])
            pages = r.pages("spark-in", 0, max(head.values()), 10)
            return [rec[3] for page in pages for rec in page.records]
        finally:
            forget(url, None, str(token_file))

    assert await asyncio.to_thread(use) == [f"v{i}".encode() for i in range(20)]
    denied = tmp_path / "other.token"
    denied.write_text(mint(KEY, "other", read=["elsewhere"]))

    def refused() -> None:
        r = remote(url, None, str(denied))
        try:
            r.publish("spark-in", [(b"u" * 16, b"x", None, None)])
        finally:
            forget(url, None, str(denied))

    with pytest.raises(Forbidden):
        await asyncio.to_thread(refused)
