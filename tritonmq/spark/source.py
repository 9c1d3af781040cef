"""``spark.readStream.format("tritonmq")`` and ``spark.read.format("tritonmq")``.

Where each part runs (PySpark's Python Data Source API): the stream reader's
offset methods run in a Python process the JVM starts per query run, ``read``
in executor workers, one reader per task. Offsets (see :mod:`tritonmq.spark.plan`)
live in Spark's checkpoint, which is the truth; ``commit(end)`` acknowledges the
query's durable subscription up to ``end`` so the broker keeps whatever Spark
has not committed, and purges the rest.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from tritonmq.client.types import Fetched
from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import Purged
from tritonmq.spark import plan
from tritonmq.spark.options import SourceOptions, sink_options, source_options
from tritonmq.spark.remote import forget, remote

log = logging.getLogger("tritonmq.spark")

SCHEMA = (
    "topic string, group string, ts long, uuid string, key binary, value binary,"
    " published timestamp"
)
HEADERS = ", headers map<string,binary>"
_PUBLISHED = pa.timestamp("us", tz="UTC")
_HEADERS = pa.map_(pa.string(), pa.binary())


class TritonMQDataSource(DataSource):
    """``spark.dataSource.register(TritonMQDataSource)``, then ``format("tritonmq")``."""

    @classmethod
    def name(cls) -> str:
        return "tritonmq"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).lower() == "true"
        return SCHEMA + (HEADERS if include else "")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TritonMQStreamReader(source_options(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return TritonMQBatchReader(source_options(self.options, batch=True))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from tritonmq.spark.sink import TritonMQStreamWriter

        return TritonMQStreamWriter(sink_options(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from tritonmq.spark.sink import TritonMQBatchWriter

        return TritonMQBatchWriter(sink_options(self.options), schema)


class TritonMQPartition(InputPartition):
    """One task's read: a ts range of one topic (pickled to the executor)."""

    def __init__(
        self,
        r: plan.Range,
        url: str,
        fail_on_loss: bool,
        headers: bool,
        fetch_max: int,
        ca_file: str | None = None,
        token_file: str | None = None,
        zk_auth_file: str | None = None,
    ) -> None:
        super().__init__(r)
        self.range = r
        self.url = url
        self.ca_file = ca_file
        self.token_file = token_file
        self.zk_auth_file = zk_auth_file
        self.fail_on_loss = fail_on_loss
        self.headers = headers
        self.fetch_max = fetch_max


def _topics(opts: SourceOptions) -> dict[str, str]:
    """The topics the query reads now: topic -> group."""
    r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
    if opts.pattern is not None:
        r.call(r.client.refresh())
        return {t: g for t, g in r.topics().items() if opts.matches(t)}
    return r.groups_of(opts.topics)


def _partitions(
    opts: SourceOptions,
    start: plan.Offset,
    end: plan.Offset,
    topics: dict[str, str],
    histories: dict[str, SlotHistory],
) -> list[TritonMQPartition]:
    r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
    fresh = [t for t in end.topics if t not in start.topics or start.groups.get(topics[t], 0) == 0]
    first = {t: ts for t in fresh if t in topics and (ts := r.first_retained(t)) is not None}
    return [
        TritonMQPartition(
            rng,
            opts.url,
            opts.fail_on_data_loss,
            opts.include_headers,
            opts.fetch_max,
            opts.ca_file,
            opts.token_file,
            opts.zk_auth_file,
        )
        for rng in plan.ranges(start, end, topics, opts.min_partitions, first, histories)
    ]


def read_partition(p: TritonMQPartition) -> Iterator[pa.RecordBatch]:
    """Fetch the partition's range from the group's primary, as Arrow record batches."""
    rng = p.range
    for got in remote(p.url, p.ca_file, p.token_file, p.zk_auth_file).pages(
        rng.topic, rng.start, rng.end, p.fetch_max, rng.group
    ):
        first = got.records[0][0] if got.records else rng.end + 1
        if got.purged is not None and rng.needed and got.purged >= rng.start:
            msg = plan.data_loss_message(rng, min(got.purged, first - 1))
            if p.fail_on_loss:
                raise Purged(msg)
            log.warning("%s", msg)
        if got.records:
            yield to_arrow(rng.topic, rng.group, got.records, got.published, p.headers)


def to_arrow(
    topic: str,
    group: str,
    records: Sequence[tuple[int, bytes, bytes | None, bytes, dict[str, Any] | None]],
    published: Sequence[tuple[int, int]],
    headers: bool,
) -> pa.RecordBatch:
    n = len(records)
    ts, uuids, keys, values, hdrs = zip(*records, strict=True)
    ms = plan.publish_times(ts, published)
    cols = [
        pa.array([topic] * n, pa.string()),
        pa.array([group] * n, pa.string()),
        pa.array(ts, pa.int64()),
        pa.array([u.hex() for u in uuids], pa.string()),
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array(ms, pa.timestamp("ms", tz="UTC")).cast(_PUBLISHED),
    ]
    names = ["topic", "group", "ts", "uuid", "key", "value", "published"]
    if headers:
        cols.append(pa.array([_header_pairs(h) for h in hdrs], _HEADERS))
        names.append("headers")
    return pa.RecordBatch.from_arrays(cols, names=names)


def _header_pairs(h: dict[str, Any] | None) -> list[tuple[str, bytes]] | None:
    if h is None:
        return None
    return [(k, v if isinstance(v, bytes) else str(v).encode()) for k, v in h.items()]


class TritonMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._initial: dict[str, Any] | None = None
        self._until: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, Any]:
        # Called more than once on a fresh query: resolve the start (and the name) once.
        if self._initial is None:
            opts = self.opts
            r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
            topics = _topics(opts)
            sub = opts.subscription or f"spark-{uuid.uuid4().hex}"
            for t in topics:  # registers the subscription: from here on the broker keeps it all
                r.commit(t, sub, 0)
            groups = sorted(set(topics.values()))
            heads = r.heads(groups)
            histories = r.histories(topics)
            first_eras: dict[str, int] = {}
            if opts.starting_timestamp is not None:
                start = _first_at(opts, topics, heads, opts.starting_timestamp)
                first_eras = _first_eras_at(opts, histories, start, opts.starting_timestamp)
            else:
                start = plan.resolve_start(opts.starting, heads, groups)
            every_era = opts.starting == "earliest" and opts.starting_timestamp is None
            offset = plan.start_offset(sub, start, topics, histories, every_era, first_eras)
            for t, ts, g in plan.commit_points(offset, topics, histories):
                r.commit(t, sub, ts, g)  # what the query skips needs no keeping
            self._initial = offset.as_json()
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_records
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        r = remote(self.opts.url, self.opts.ca_file, self.opts.token_file, self.opts.zk_auth_file)
        heads = r.heads(r.groups())  # every group: a slot may move to one mid-run
        self._until = {g: h + 1 for g, h in heads.items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        opts = self.opts
        s = plan.Offset.from_json(start)
        r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
        topics = _topics(opts)
        for t in topics:
            if t not in s.topics:
                r.commit(t, s.subscription, 0)  # a new topic: keep it all from now on
        histories = r.histories(topics)  # re-reads the cluster: a move shows here
        topics = r.groups_of(topics)
        heads = r.heads(set(topics.values()) | set(s.groups))
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        floors: dict[str, int] = {}
        if max_rows is not None:
            for t, g in topics.items():
                if s.groups.get(g, 0) == 0 and (ts := r.first_retained(t)) is not None:
                    floors[g] = min(floors.get(g, ts), ts)
        end = plan.advance(s, heads, topics, max_rows, self._until, floors, histories)
        return end.as_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        s, e = plan.Offset.from_json(start), plan.Offset.from_json(end)
        r = remote(self.opts.url, self.opts.ca_file, self.opts.token_file, self.opts.zk_auth_file)
        # the plan re-read the cluster; a finished era's range never changes after
        histories = r.histories(e.topics, fresh=False)
        return _partitions(self.opts, s, e, r.groups_of(e.topics), histories)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TritonMQPartition)
        return read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        e = plan.Offset.from_json(end)
        r = remote(self.opts.url, self.opts.ca_file, self.opts.token_file, self.opts.zk_auth_file)
        # a moved topic: each group that held an era gets its part (the one serving the
        # subscription's stored era hands it on and purges its sealed remainder, M5, M6)
        histories = r.histories(e.topics, fresh=False)
        for t, ts, g in plan.commit_points(e, r.groups_of(e.topics), histories):
            r.commit(t, e.subscription, ts, g)

    def stop(self) -> None:
        forget(self.opts.url, self.opts.ca_file, self.opts.token_file, self.opts.zk_auth_file)


def _first_at(
    opts: SourceOptions, topics: dict[str, str], heads: dict[str, int], wall_ms: int
) -> dict[str, int]:
    """Per group, the first ts accepted at or after ``wall_ms`` (publish times grow with
    ts in a group, so the earliest such record of any topic is the group's boundary)."""
    r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
    start = {g: h + 1 for g, h in heads.items()}
    for t, g in topics.items():
        hit = _first_record_at(r.pages(t, 0, heads.get(g, 0), opts.fetch_max), wall_ms)
        if hit is not None:
            start[g] = min(start[g], hit)
    return start


def _first_record_at(pages: Iterator[Fetched], wall_ms: int) -> int | None:
    """The ts of the first record of ``pages`` accepted at or after ``wall_ms``."""
    for got in pages:
        ms = plan.publish_times([rec[0] for rec in got.records], got.published)
        hit = next(
            (rec[0] for rec, m in zip(got.records, ms, strict=True) if m and m >= wall_ms), None
        )
        if hit is not None:
            return hit
    return None


def _first_eras_at(
    opts: SourceOptions, histories: dict[str, SlotHistory], start: dict[str, int], wall_ms: int
) -> dict[str, int]:
    """Per moved topic, its first ended era holding a record accepted at or after
    ``wall_ms``, read at that era's group; lowers ``start`` of that group to the record
    (a group's ts cover all its eras). A topic none of whose ended eras has one starts at
    its current era, which :func:`_first_at` placed."""
    r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
    first: dict[str, int] = {}
    for t, h in histories.items():
        for e in range(h.era):
            g, lo, hi = h.group_of_era(e), h.after_of(e) + 1, h.history[e].until
            hit = _first_record_at(r.pages(t, lo, hi, opts.fetch_max, g), wall_ms)
            if hit is not None:
                first[t] = e
                start[g] = min(start.get(g, hit), hit)
                break
    return first


class TritonMQBatchReader(DataSourceReader):
    """``spark.read``: what is retained between ``startingPosition`` (default earliest) and
    ``endingPosition`` (default latest, exclusive like Kafka's ``endingOffsets``)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
        topics = _topics(opts)
        groups = sorted(set(topics.values()))
        heads = r.heads(groups)
        histories = r.histories(topics)
        start = plan.resolve_start(opts.starting, heads, groups)
        end = plan.resolve_start(opts.ending, heads, groups)
        s = plan.start_offset("", start, topics, histories, opts.starting == "earliest")
        e = plan.Offset("", end, s.topics, {t: h.era for t, h in histories.items()})
        return _partitions(opts, s, e, topics, histories)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TritonMQPartition)
        return read_partition(partition)
