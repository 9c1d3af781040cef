"""The Spark source against a real local Spark, real ZooKeeper and real broker processes."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import wait_until, zk_option
from tritonmq.client import SyncClient
from tritonmq.devtools.cluster import DevCluster
from tritonmq.errors import Purged
from tritonmq.spark.remote import Remote

# Real Spark on 2 shared cores: a test can take minutes (the driver-kill test starts a
# second Spark). The limit only stops a hung run; it asserts nothing about speed.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]


def reader(spark: Any, c: DevCluster, topics: str, **options: str) -> Any:
    r = spark.readStream.format("tritonmq").option("zk", zk_option(c)).option("topics", topics)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def to_parquet(df: Any, tmp: Path, **trigger: Any) -> Any:
    """Start the query. Spark gives its Python planner process a fixed 10 s to connect back,
    which a starved shared machine can miss: a query that died of that before its first
    batch (so before touching TritonMQ or the checkpoint) is started again, twice at most."""

    def start() -> Any:
        return (
            df.writeStream.format("parquet")
            .option("path", str(tmp / "out"))
            .option("checkpointLocation", str(tmp / "checkpoint"))
            .trigger(**trigger)
            .start()
        )

    def started(q: Any) -> bool:
        return q.lastProgress is not None or not q.isActive

    q = start()
    for _ in range(2):
        wait_until(lambda: started(q), 300, "the query's first batch")  # noqa: B023
        err = q.exception()
        if err is None or "failed to connect back" not in str(err) or q.lastProgress:
            break
        q = start()
    return q


def ingested(spark: Any, tmp: Path, q: Any, count: int, timeout: float, what: str) -> None:
    """Wait until the query's output holds ``count`` rows; a query that died says why."""

    def enough() -> bool:
        err = q.exception()
        if err is not None:
            raise AssertionError(f"the query failed while waiting for {what}: {err}")
        return len(output(spark, tmp)) >= count

    wait_until(enough, timeout, what)


def output(spark: Any, tmp: Path) -> list[tuple[str, bytes]]:
    """(topic, value) of every row the file sink has committed so far."""
    if not (tmp / "out" / "_spark_metadata").exists():
        return []
    return [(r.topic, bytes(r.value)) for r in spark.read.parquet(str(tmp / "out")).collect()]


def topics_in(admin: Remote, group: str, n: int, prefix: str) -> list[str]:
    owners = admin.groups_of(f"{prefix}{i}" for i in range(1000))
    return [t for t, g in owners.items() if g == group][:n]


class Producer:
    """Publishes numbered records to ``topic`` until stopped; keeps what was acknowledged."""

    def __init__(self, url: str, topic: str) -> None:
        self.client = SyncClient(url)
        self.topic = topic
        self.acked: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            values = [b"p-%06d" % i for i in range(n, n + 50)]
            self.client.publish_many(self.topic, values)  # retried across failovers
            self.acked.extend(values)
            n += 50
            time.sleep(0.05)

    def wait_for(self, count: int, timeout: float = 120) -> None:
        wait_until(lambda: len(self.acked) >= count, timeout, f"{count} acknowledged records")

    def close(self) -> list[bytes]:
        self.stop.set()
        self.thread.join(timeout=120)
        self.client.close()
        return self.acked


def zk_option_url(c: DevCluster) -> str:
    return f"zk://{zk_option(c)}"


def exactly_once(got: list[bytes], want: list[bytes]) -> None:
    dupes = [v for v, n in Counter(got).items() if n > 1]
    assert not dupes, f"{len(dupes)} duplicate(s), e.g. {dupes[:3]}"
    missing = sorted(set(want) - set(got))
    assert not missing, f"{len(missing)} missing, e.g. {missing[:3]}"
    assert len(got) == len(want)


# --- 1 ------------------------------------------------------------------------------


def test_available_now_ingests_50k_records_of_several_topics_in_two_groups_once(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    c = make_cluster(groups=2, replicas=1, settings={"retention_s": 600.0, "min_insync": 1})
    admin = Remote(zk_option_url(c))
    with SyncClient(zk_option_url(c)) as client:
        topics = topics_in(admin, "g1", 2, "ingest-") + topics_in(admin, "g2", 2, "ingest-")
        want: dict[tuple[str, bytes], int] = {}
        before = time.time()
        for t in topics:
            values = [b"%s-%05d" % (t.encode(), i) for i in range(12_500)]
            for v, ack in zip(values, client.publish_many(t, values), strict=True):
                want[(t, v)] = ack.ts
        after = time.time()
    admin.close()
    q = to_parquet(
        reader(spark, c, ",".join(topics), startingPosition="earliest"),
        tmp_path,
        availableNow=True,
    )
    q.awaitTermination(300)
    assert q.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = Counter((r.topic, bytes(r.value)) for r in rows)
    assert len(rows) == 50_000 and set(got) == set(want) and max(got.values()) == 1
    assert {r.group for r in rows} == {"g1", "g2"}
    assert all(want[(r.topic, bytes(r.value))] == r.ts for r in rows)
    assert all(before - 1 <= r.published.timestamp() <= after + 1 for r in rows[:1000])


# --- 2 ------------------------------------------------------------------------------


def test_a_processing_time_query_restarted_from_its_checkpoint_misses_and_repeats_nothing(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    # Retention 0: only the query's durable subscription keeps records while it is down.
    c = make_cluster(replicas=2)
    df = reader(spark, c, "live", startingPosition="earliest")
    q = to_parquet(df, tmp_path, processingTime="500 milliseconds")
    producer = Producer(zk_option_url(c), "live")
    try:
        ingested(spark, tmp_path, q, 300, 120, "the query to ingest")
        q.stop()
        while_down = len(producer.acked)
        producer.wait_for(while_down + 500)  # published while the query is down
        q = to_parquet(df, tmp_path, processingTime="500 milliseconds")
        producer.wait_for(len(producer.acked) + 300)
    finally:
        want = producer.close()
    ingested(spark, tmp_path, q, len(want), 180, "every record")
    q.stop()
    exactly_once([v for _, v in output(spark, tmp_path)], want)


# --- 3 ------------------------------------------------------------------------------


def test_a_query_survives_a_sigkill_of_the_groups_primary(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    c = make_cluster(replicas=3)
    df = reader(spark, c, "failover", startingPosition="earliest")
    q = to_parquet(df, tmp_path, processingTime="500 milliseconds")
    producer = Producer(zk_option_url(c), "failover")
    try:
        ingested(spark, tmp_path, q, 300, 120, "the query to ingest")
        old = c.primary("g1")
        assert old is not None
        c.kill(old)
        wait_until(lambda: c.primary("g1") not in (None, old), 60, "a new primary")
        producer.wait_for(len(producer.acked) + 500)
    finally:
        want = producer.close()
    ingested(spark, tmp_path, q, len(want), 180, "every record")
    assert q.exception() is None
    q.stop()
    exactly_once([v for _, v in output(spark, tmp_path)], want)


# --- 5 ------------------------------------------------------------------------------


def test_fail_on_data_loss_names_what_was_purged_and_false_goes_on(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    c = make_cluster(replicas=1, settings={"min_insync": 1})
    admin = Remote(zk_option_url(c))
    try:

        def run(**options: str) -> Any:
            df = reader(
                spark, c, "lossy", startingPosition="earliest", subscription="etl", **options
            )
            q = to_parquet(df, tmp_path, availableNow=True)
            try:
                q.awaitTermination(300)
            except Exception as e:  # the query failed: StreamingQueryException
                return e
            return None

        admin.commit("lossy", "etl", 0)  # the query's subscription, before anything is published
        admin.call(admin.client.publish_many("lossy", [b"early-%d" % i for i in range(10)]))
        assert run() is None
        values = [b"late-%03d" % i for i in range(100)]
        acks = admin.call(admin.client.publish_many("lossy", values))
        # Someone else acknowledges the query's subscription past half of what it still needs.
        admin.commit("lossy", "etl", acks[49].ts)

        def purged() -> bool:
            try:
                admin.call(admin.client.fetch("lossy", acks[0].ts, acks[-1].ts))
            except Purged:
                return True
            return False

        wait_until(purged, 30, "the broker to purge what was acknowledged")
        err = run()
        assert err is not None
        msg = str(err)
        assert "topic 'lossy' in group g1" in msg and f"ts {acks[0].ts}.." in msg
        assert "failOnDataLoss=false" in msg

        assert run(failOnDataLoss="false") is None
    finally:
        admin.close()
    values = sorted(v for _, v in output(spark, tmp_path))
    want = [b"early-%d" % i for i in range(10)] + [b"late-%03d" % i for i in range(50, 100)]
    assert values == sorted(want)


# --- 6 ------------------------------------------------------------------------------


def test_a_batch_read_returns_exactly_the_range_asked_for(
    spark: Any, make_cluster: Callable[..., DevCluster]
) -> None:
    c = make_cluster(replicas=1, settings={"retention_s": 600.0, "min_insync": 1})
    with SyncClient(zk_option_url(c)) as client:
        acks = client.publish_many("ranged", [b"r-%03d" % i for i in range(100)])
        client.publish_many("other", [b"x"] * 10)  # same group, interleaved ts
        acks += client.publish_many("ranged", [b"r-%03d" % i for i in range(100, 120)])
    rows = (
        spark.read.format("tritonmq")
        .option("zk", zk_option(c))
        .option("topics", "ranged")
        .option("startingPosition", f'{{"g1": {acks[10].ts}}}')
        .option("endingPosition", f'{{"g1": {acks[110].ts}}}')
        .load()
        .collect()
    )
    assert sorted(bytes(r.value) for r in rows) == [b"r-%03d" % i for i in range(10, 110)]
    assert sorted(r.ts for r in rows) == [a.ts for a in acks[10:110]]
    # A pattern over existing topics, no positions: everything retained, of matching topics only.
    everything = spark.read.format("tritonmq").option("zk", zk_option(c))
    got = everything.option("topicPattern", "rang.*").load().collect()
    assert len(got) == 120 and {r.topic for r in got} == {"ranged"}


# --- issue 11, test 5 ---------------------------------------------------------------------


def test_a_query_reads_a_topic_whose_slot_moves_there_and_back_without_gap_or_duplicate(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    """The slot of the query's topics moves from g1 to g2 and back while producers publish
    and the query runs: it reads the old group's remainder, then the new group's era, and
    every acknowledged record lands once (docs/replication.md M3)."""
    from tests.integration.test_slot_moves import begin_moves, histories, wait_normal
    from tritonmq.core.slots import slot_of

    c = make_cluster(groups=2, settings={"retention_s": 300.0})
    admin = Remote(zk_option_url(c))
    try:
        moved = topics_in(admin, "g1", 1, "mv")[0]
        slot = slot_of(moved, 64)
        steady = topics_in(admin, "g2", 1, "st")[0]
    finally:
        admin.close()
    df = reader(spark, c, f"{moved},{steady}", startingPosition="earliest")
    q = to_parquet(df, tmp_path, processingTime="500 milliseconds")
    producers = [Producer(zk_option_url(c), t) for t in (moved, steady)]
    try:
        ingested(spark, tmp_path, q, 300, 120, "the query to ingest")
        for to in ("g2", "g1"):
            begin_moves(c, [slot], to)
            hs = wait_normal(c, [slot])
            assert hs[slot].owner == to
            for p in producers:
                p.wait_for(len(p.acked) + 300)
            ingested(spark, tmp_path, q, sum(len(p.acked) for p in producers), 180, "the moves")
    finally:
        want = [v for p in producers for v in p.close()]
    assert histories(c)[slot].era == 2
    ingested(spark, tmp_path, q, len(want), 180, "every record")
    assert q.exception() is None
    q.stop()
    got = output(spark, tmp_path)
    for t, p in zip((moved, steady), producers, strict=True):
        exactly_once([v for topic, v in got if topic == t], p.acked)


def test_once_a_query_read_past_a_seal_the_old_group_purges_the_slot_s_sealed_remainder(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    """Issue 11: "the old group keeps the sealed records until every durable subscription
    has read past the seal, then purges them". The query's subscription is stored at era 0
    (g1's); after the move its commits reach g1 in g1's ts, so g1 hands it on and purges the
    slot's remainder, and g2 then purges what the query acknowledged of era 1
    (docs/replication.md M5, M6; retention 0: a record goes once nobody needs it)."""
    from tests.integration.test_slot_moves import begin_moves, wait_normal
    from tritonmq.core.slots import slot_of
    from tritonmq.wire.codec import MAX_SAFE_INT

    c = make_cluster(groups=2)
    admin = Remote(zk_option_url(c))
    moved = topics_in(admin, "g1", 1, "pg")[0]
    slot = slot_of(moved, 64)
    q = to_parquet(
        reader(spark, c, moved, startingPosition="earliest"),
        tmp_path,
        processingTime="500 milliseconds",
    )
    p = Producer(zk_option_url(c), moved)
    try:
        ingested(spark, tmp_path, q, 300, 120, "the query to ingest")
        begin_moves(c, [slot], "g2")
        h = wait_normal(c, [slot])[slot]
        assert (h.owner, h.era) == ("g2", 1)
        until, after = h.history[0].until, h.after
        p.wait_for(len(p.acked) + 300)
        ingested(spark, tmp_path, q, len(p.acked), 180, "records of the new era")

        def retained(group: str, lo: int, hi: int) -> list[int]:
            return [r[0] for r in admin.fetch(moved, lo, hi, 1, group).records]

        wait_until(
            lambda: not retained("g1", 0, until), 120, "g1 to purge the slot's sealed remainder"
        )
        wait_until(
            lambda: retained("g2", 0, MAX_SAFE_INT)[:1] > [after + 1],
            120,
            "g2 to purge what the query acknowledged of era 1",
        )
    finally:
        want = p.close()
        admin.close()
    ingested(spark, tmp_path, q, len(want), 180, "every record")
    assert q.exception() is None
    q.stop()
    exactly_once([v for _, v in output(spark, tmp_path)], want)


def a_topic_of_g1(make_cluster: Callable[..., DevCluster], prefix: str) -> tuple[DevCluster, str]:
    """A 2-group cluster keeping records 5 minutes, and a topic g1 owns."""
    c = make_cluster(groups=2, settings={"retention_s": 300.0})
    admin = Remote(zk_option_url(c))
    try:
        return c, topics_in(admin, "g1", 1, prefix)[0]
    finally:
        admin.close()


def move_to_g2(c: DevCluster, topic: str) -> None:
    from tests.integration.test_slot_moves import begin_moves, wait_normal
    from tritonmq.core.slots import slot_of

    slot = slot_of(topic, 64)
    begin_moves(c, [slot], "g2")
    assert wait_normal(c, [slot])[slot].owner == "g2"


def ingests_exactly(spark: Any, tmp: Path, q: Any, want: list[bytes], what: str) -> None:
    """The query's output is ``want``, each once; the query ended without an error."""
    ingested(spark, tmp, q, len(want), 180, what)
    q.processAllAvailable()
    assert q.exception() is None
    q.stop()
    exactly_once([v for _, v in output(spark, tmp)], want)


def test_a_query_started_at_latest_on_a_moved_topic_reads_only_what_comes_after_it(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    """The topic's slot moved g1 -> g2 before the query began, with records in both eras:
    a query started at latest (the streaming default) gets the records published after it
    began and none of either era's earlier ones (it planned the old eras from era 0, and
    its first batch read them whole)."""
    c, moved = a_topic_of_g1(make_cluster, "lt")
    with SyncClient(zk_option_url(c)) as client:
        client.publish_many(moved, [b"era0-%03d" % i for i in range(50)])
        move_to_g2(c, moved)
        client.publish_many(moved, [b"era1-%03d" % i for i in range(50)])
        q = to_parquet(reader(spark, c, moved), tmp_path, processingTime="500 milliseconds")
        after = [b"after-%03d" % i for i in range(100)]
        client.publish_many(moved, after)
    ingests_exactly(spark, tmp_path, q, after, "the records published after the start")


def test_a_query_started_at_a_time_before_a_move_reads_from_that_time_across_the_eras(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    """``startingTimestamp`` earlier than the topic's move g1 -> g2: the query gets the old
    era's records published from that time on, the new era's, and what comes after it
    began; none published before the time (it began at the current era, and the old
    era's later records were never read)."""
    c, moved = a_topic_of_g1(make_cluster, "ts")
    with SyncClient(zk_option_url(c)) as client:
        client.publish_many(moved, [b"before-%03d" % i for i in range(50)])
        at = int(time.time() * 1000) + 1  # later than every record above
        wait_until(lambda: time.time() * 1000 >= at, 5, "the clock to pass the start time")
        old = [b"old-%03d" % i for i in range(50)]
        client.publish_many(moved, old)
        move_to_g2(c, moved)
        new = [b"new-%03d" % i for i in range(50)]
        client.publish_many(moved, new)
        q = to_parquet(
            reader(spark, c, moved, startingTimestamp=str(at)),
            tmp_path,
            processingTime="500 milliseconds",
        )
        after = [b"after-%03d" % i for i in range(20)]
        client.publish_many(moved, after)
    ingests_exactly(spark, tmp_path, q, old + new + after, "the records from the start time on")
