"""/metrics and /readyz of real brokers, scraped over HTTP through publish load, a SIGKILL
failover and a backup's catch-up (docs/operations.md, "Metrics and health")."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import group_info, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster, wait_for

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def http_url(c: DevCluster, bid: str) -> str:
    return c.brokers[bid].url.replace("ws://", "http://", 1)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(c: DevCluster, bid: str) -> Samples:
    status, body = get(http_url(c, bid) + "/metrics")
    assert status == 200
    out: Samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            labels = frozenset((k, v) for k, v in s.labels.items() if k != "group")
            out[(s.name, labels)] = s.value
    return out


def metric(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def eventually(c: DevCluster, bid: str, pred: Callable[[Samples], bool], what: str) -> Samples:
    """Scrape ``bid`` until ``pred`` holds (deadline 30 s); the scrape that satisfied it."""
    seen: list[Samples] = []

    def check() -> bool:
        seen.append(scrape(c, bid))
        return pred(seen[-1])

    wait_for(check, 30, f"{bid}'s metrics to show {what}", 0.1)
    return seen[-1]


async def test_metrics_follow_publish_load_a_sigkill_failover_and_a_draining_lag(
    cluster: DevCluster,
) -> None:
    old = await asyncio.to_thread(cluster.primary)
    assert old is not None
    backups = [b for b in cluster.brokers if b != old]
    before = await asyncio.to_thread(scrape, cluster, old)
    assert metric(before, "tritonmq_is_primary") == 1
    assert metric(before, "tritonmq_role", role="leading") == 1
    assert metric(before, "tritonmq_insync_replicas") == 3
    assert metric(before, "tritonmq_under_replicated") == 0
    for b in backups:
        s = await asyncio.to_thread(scrape, cluster, b)
        assert metric(s, "tritonmq_role", role="following") == 1
        assert metric(s, "tritonmq_is_primary") == 0

    async with Client(zk_url(cluster), timeout=60) as client:
        async with client.subscribe("m", subscription="watch", from_="latest") as sub:
            # Load, with the subscriber reading nothing: its lag grows.
            for i in range(10):
                await client.publish_many("m", [f"a{i}-{j}".encode() for j in range(100)])
            loaded = await asyncio.to_thread(
                eventually,
                cluster,
                old,
                lambda s: (
                    metric(s, "tritonmq_subscription_lag_records", topic="m", subscription="watch")
                    == 1000
                ),
                "a lag of 1000 records",
            )
            published = metric(loaded, "tritonmq_published_records_total")
            assert published - metric(before, "tritonmq_published_records_total") == 1000
            assert metric(loaded, "tritonmq_publish_ack_seconds_count") >= 10
            assert metric(loaded, "tritonmq_delivered_records_total") >= 1
            assert metric(loaded, "tritonmq_retained_records") >= 1000
            lag_s = "tritonmq_subscription_lag_seconds"
            assert metric(loaded, lag_s, topic="m", subscription="watch") > 0

            # The subscriber drains it.
            for _ in range(1000):
                await (await sub.get(timeout=30)).ack()
            drained = await asyncio.to_thread(
                eventually,
                cluster,
                old,
                lambda s: (
                    metric(s, "tritonmq_subscription_lag_records", topic="m", subscription="watch")
                    == 0
                ),
                "the lag drained",
            )
            assert metric(drained, lag_s, topic="m", subscription="watch") == 0
            assert metric(drained, "tritonmq_delivered_records_total") >= 1000
            assert metric(drained, "tritonmq_publish_to_delivery_seconds_count") >= 1

            # A steady load, consumed as it comes: the primary's counters move between scrapes.
            acked: list[bytes] = []
            seen: set[bytes] = set()
            stop = asyncio.Event()

            async def consume() -> None:
                while True:
                    msg = await sub.get()
                    seen.add(msg.value)
                    await msg.ack()

            async def produce() -> None:
                i = 0
                while not stop.is_set():
                    values = [f"b-{i}-{j}".encode() for j in range(100)]
                    await client.publish_many("m", values)
                    acked.extend(values)
                    i += 1

            consumer = asyncio.create_task(consume())
            load = asyncio.create_task(produce())
            first = await asyncio.to_thread(scrape, cluster, old)
            await asyncio.to_thread(
                eventually,
                cluster,
                old,
                lambda s: all(
                    metric(s, name) > metric(first, name)
                    for name in (
                        "tritonmq_published_records_total",
                        "tritonmq_publish_ack_seconds_count",
                        "tritonmq_delivered_records_total",
                        # the log's end moves at append, ahead of the counters (at ack): one
                        # scrape may catch a batch appended but not yet acknowledged
                        "tritonmq_log_end_ts",
                    )
                ),
                "publish, ack and delivery counters and the log's end moving under load",
            )

            # SIGKILL the primary mid-load; the load goes on to the new primary.
            cluster.kill(old)
            new = await asyncio.to_thread(wait_new_primary, cluster, old)
            after = await asyncio.to_thread(
                eventually,
                cluster,
                new,
                lambda s: (
                    metric(s, "tritonmq_is_primary") == 1
                    and metric(s, "tritonmq_insync_replicas") == 2
                    and metric(s, "tritonmq_published_records_total") > 0
                ),
                "it leads with an ISR of 2 and acknowledges the load",
            )
            stop.set()
            await asyncio.wait_for(load, 60)
            assert metric(after, "tritonmq_role", role="leading") == 1
            assert metric(after, "tritonmq_leader_elections_total") == 1
            assert metric(after, "tritonmq_failovers_total") == 1
            assert metric(after, "tritonmq_failover_pause_seconds_count") == 1
            assert metric(after, "tritonmq_isr_shrinks_total") >= 1, "the old primary left"
            assert metric(after, "tritonmq_epoch") == metric(before, "tritonmq_epoch") + 1
            assert metric(after, "tritonmq_under_replicated") == 1
            assert metric(after, "tritonmq_under_min_isr") == 0
            other = next(b for b in backups if b != new)
            follower = await asyncio.to_thread(scrape, cluster, other)
            assert metric(follower, "tritonmq_role", role="following") == 1
            assert metric(follower, "tritonmq_epoch") == metric(after, "tritonmq_epoch")

            # The subscriber follows the new primary and gets everything acknowledged.
            await asyncio.to_thread(
                wait_for, lambda: seen >= set(acked), 60, "every acknowledged record delivered"
            )
            consumer.cancel()
            await asyncio.to_thread(
                eventually,
                cluster,
                new,
                lambda s: (
                    metric(s, "tritonmq_subscription_lag_records", topic="m", subscription="watch")
                    == 0
                    and metric(
                        s, "tritonmq_subscription_lag_seconds", topic="m", subscription="watch"
                    )
                    == 0
                ),
                "the lag drained on the new primary",
            )

    # The killed broker comes back as a backup; the primary counts the ISR growing back.
    await asyncio.to_thread(cluster.restart, old)
    await asyncio.to_thread(
        eventually,
        cluster,
        new,
        lambda s: (
            metric(s, "tritonmq_insync_replicas") == 3
            and metric(s, "tritonmq_isr_expands_total") >= 1
            and metric(s, "tritonmq_under_replicated") == 0
        ),
        "the ISR back at 3",
    )
    back = await asyncio.to_thread(scrape, cluster, old)
    assert metric(back, "tritonmq_role", role="following") == 1
    assert metric(back, "tritonmq_leader_elections_total") == 0, "a new process, new counters"


async def test_readyz_is_503_on_a_backup_catching_up_and_200_once_in_sync(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(settings={"retention_s": 300.0})
    primary = await asyncio.to_thread(c.primary)
    assert primary is not None
    backup = next(b for b in c.brokers if b != primary)
    for bid in c.brokers:
        status, reason = await asyncio.to_thread(get, http_url(c, bid) + "/readyz")
        assert status == 200, reason
        assert (await asyncio.to_thread(get, http_url(c, bid) + "/healthz"))[0] == 200

    async with Client(zk_url(c), timeout=60) as client:
        value = b"x" * 200
        for _ in range(75):  # 150,000 records the restarted backup must copy
            await client.publish_many("bulk", [value] * 2000)

    c.kill(backup)
    await asyncio.to_thread(c.restart, backup)
    url = http_url(c, backup) + "/readyz"
    seen: list[tuple[float, int, str]] = []

    def ready() -> bool:
        status, reason = get(url)
        seen.append((time.monotonic(), status, reason.strip()))
        return status == 200

    await asyncio.to_thread(wait_for, ready, 60, f"{backup} to be ready", 0.02)
    unready = [(s, r) for _, s, r in seen if s != 200]
    assert unready and all(s == 503 for s, _ in unready), seen
    assert any("catching up" in r for _, r in unready), f"never seen catching up: {seen}"
    # Ready means in the ISR: ZooKeeper says so too.
    assert backup in group_info(c)["isr"]
    assert "in-sync backup of g1" in seen[-1][2]
