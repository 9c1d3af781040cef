"""TLS end to end: brokers serving wss:// with a local CA's certificates (real processes,
real ZooKeeper, SIGKILL), clients verifying them, and the typed error when they cannot."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import group_info, process_gone, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.errors import TlsError

pytestmark = pytest.mark.integration
TRITONMQ = [sys.executable, "-m", "tritonmq"]
NOT_A_HANG = 30.0  # a deadline on the test, far above what a refused handshake takes


@pytest.fixture
def tls_cluster(make_cluster: Callable[..., DevCluster]) -> DevCluster:
    return make_cluster(settings={"retention_s": 300.0}, tls=True)


async def test_wss_publish_subscribe_and_primary_sigkill_lose_nothing(
    tls_cluster: DevCluster,
) -> None:
    c = tls_cluster
    info = group_info(c)
    assert c.ca_file and all(u.startswith("wss://") for u in info["members"].values())
    assert sorted(info["isr"]) == sorted(c.brokers)  # the backups replicate over TLS
    n = 4_000
    delivered: list[tuple[int, bytes]] = []
    acked: list[tuple[int, bytes]] = []
    url = c.brokers["g1b1"].url  # bootstrap from one broker's wss:// URL
    async with (
        Client(url, ca_file=c.ca_file, timeout=60) as subc,
        subc.subscribe("orders", from_="latest") as sub,
        Client(url, ca_file=c.ca_file, timeout=60) as pub,
    ):

        async def consume() -> None:
            async for msg in sub:
                delivered.append((msg.ts, msg.value))
                await msg.ack()

        consumer = asyncio.create_task(consume())
        old = await asyncio.to_thread(c.primary)
        assert old is not None
        for i in range(n // 100):
            if i == n // 200:
                c.kill(old, signal.SIGKILL)
            values = [f"{i * 100 + j}".encode() for j in range(100)]
            acks = await pub.publish_many("orders", values)
            acked.extend(zip((a.ts for a in acks), values, strict=True))
        new = await asyncio.to_thread(wait_new_primary, c, old)
        assert new != old and c.brokers[new].url.startswith("wss://")
        everything = {v for _, v in acked}
        assert len(everything) == n
        await asyncio.to_thread(
            wait_for, lambda: {v for _, v in delivered} >= everything, 60, "every acked record"
        )
        consumer.cancel()
        # The surviving backup follows the new primary over TLS: back in the ISR.
        await asyncio.to_thread(
            wait_for, lambda: len(group_info(c)["isr"]) == 2, 30, "an ISR of the two survivors"
        )
    values = [v for _, v in delivered]
    assert len(values) == len(set(values)), "a record reached the application twice"
    by_value = dict((v, ts) for ts, v in delivered)
    assert all(by_value[v] == ts for ts, v in acked), "a delivered ts differs from its ack"


async def test_a_client_without_the_ca_gets_the_typed_tls_error(tls_cluster: DevCluster) -> None:
    c = tls_cluster
    wss = c.brokers["g1b1"].url
    # Bootstrapping from a wss:// URL: connect() itself refuses.
    with pytest.raises(TlsError, match="certificate verify failed"):
        await asyncio.wait_for(Client(wss, timeout=60).connect(), NOT_A_HANG)
    # Through ZooKeeper (no TLS there): the publish fails with it, long before its timeout.
    async with Client(zk_url(c), timeout=120) as no_ca:
        with pytest.raises(TlsError, match="certificate verify failed") as e:
            await asyncio.wait_for(no_ca.publish("t", b"x"), NOT_A_HANG)
        assert not e.value.retriable
        with pytest.raises(TlsError):
            async with no_ca.subscribe("t") as sub:
                await asyncio.wait_for(sub.get(), NOT_A_HANG)
    # The brokers keep serving clients that trust the CA.
    async with Client(zk_url(c), ca_file=c.ca_file, timeout=60) as ok:
        ack = await ok.publish("t", b"fine")
        assert ack.ts > 0


def test_tritonmq_dev_tls_then_pub_and_sub_with_ca_file(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    config = tmp_path / "broker.toml"
    config.write_text("[broker]\nretention_s = 300.0\n")
    dev = subprocess.Popen(
        [*TRITONMQ, "dev", "--tls", "--port", "0", "--state-file", str(state_file)]
        + ["--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(state_file.exists, 90, "the dev cluster's state file")
        state = json.loads(state_file.read_text())
        ca, url = state["ca_file"], state["brokers"][0]["url"]
        assert Path(ca).is_file() and url.startswith("wss://")

        def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
            run_env = {**os.environ, **env}
            return subprocess.run(
                [*TRITONMQ, *args], capture_output=True, text=True, timeout=60, env=run_env
            )

        pub = cli("pub", "--url", url, "--ca-file", ca, "greetings", "hello over tls")
        assert pub.returncode == 0, pub.stderr
        ts = int(pub.stdout.split("ts=")[1].split()[0])
        sub = cli("sub", "--zk", state["zk"], "--ca-file", ca, "greetings", "--from", "earliest",
                  "--count", "1")  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        assert sub.stdout.splitlines() == [f"{ts}\thello over tls"]
        # no CA: neither --ca-file nor the local context `dev` wrote (it names its CA)
        refused = cli(
            "pub", "--url", url, "greetings", "no ca", TRITONMQ_CONTEXT=str(tmp_path / "none.json")
        )
        assert refused.returncode == 1 and "TLS" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=60) == 0
    for b in state["brokers"]:
        assert process_gone(b["pid"]), f"broker {b['id']} outlived the dev cluster"


def test_spark_remote_writes_and_reads_over_wss_with_ca_file(tls_cluster: DevCluster) -> None:
    """What Spark's driver and executors use, with option caFile (no Spark needed here)."""
    from tritonmq.spark.remote import forget, remote

    ca, url = tls_cluster.ca_file, tls_cluster.brokers["g1b2"].url
    try:
        r = remote(url, ca)
        records = [(bytes([i]) * 16, f"v{i}".encode(), None, None) for i in range(50)]
        assert r.publish("spark-tls", records) == 50
        head = r.heads([r.groups_of(["spark-tls"])["spark-tls"]])
        got = [
            rec for page in r.pages("spark-tls", 0, max(head.values()), 20) for rec in page.records
        ]
        assert [rec[3] for rec in got] == [v for _, v, _, _ in records]
    finally:
        forget(url, ca)


async def test_a_backup_that_does_not_trust_the_primarys_certificate_never_replicates(
    tls_cluster: DevCluster, tmp_path: Path
) -> None:
    from tritonmq.devtools.certs import make_dev_certs

    c = tls_cluster
    primary = await asyncio.to_thread(c.primary)
    backup = next(b for b in c.brokers if b != primary)
    stranger = make_dev_certs(tmp_path / "other-ca")
    c.brokers[backup].extra = ["--tls-ca", str(stranger.ca)]  # the last --tls-ca wins
    await asyncio.to_thread(c.restart, backup)
    await asyncio.to_thread(
        wait_for,
        lambda: "TLS handshake with primary" in c.log_tail(backup, 200),
        30,
        f"{backup} to refuse the primary's certificate",
    )
    assert backup not in group_info(c)["isr"]
    async with Client(zk_url(c), ca_file=c.ca_file, timeout=60) as client:
        assert (await client.publish("t", b"still served")).ts > 0  # the other two go on
    assert backup not in group_info(c)["isr"]
    c.brokers[backup].extra = []
    await asyncio.to_thread(c.restart, backup)
    await asyncio.to_thread(
        wait_for, lambda: backup in group_info(c)["isr"], 30, f"{backup} back in the ISR"
    )


def test_broker_with_unusable_tls_files_exits_2_naming_them(tmp_path: Path) -> None:
    from tritonmq.devtools.certs import make_dev_certs

    a, b = make_dev_certs(tmp_path / "a"), make_dev_certs(tmp_path / "b")
    cases = [
        (["--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(a.key)], "not found"),
        (["--tls-cert", str(a.cert), "--tls-key", str(b.key)], "cannot load"),
        (["--tls-cert", str(a.cert)], "tls_key"),
        (["--tls-cert", str(a.cert), "--tls-key", str(a.key), "--tls-ca", str(a.key)], "CA"),
    ]
    for args, says in cases:
        r = subprocess.run(
            [*TRITONMQ, "broker", "--zk", "127.0.0.1:1", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, (args, r.stderr)
        assert says in r.stderr and "Traceback" not in r.stderr, r.stderr
