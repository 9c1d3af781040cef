"""``df.writeStream.format("tritonmq")`` and ``df.write.format("tritonmq")``.

Executors publish each row with a uuid derived from (sink id, batch id,
partition id, row index): when Spark replays a batch after a crash, the same
rows get the same uuids and the broker's dedup drops them, so each row lands
once while the replay comes within the broker's dedup window. Records are
acknowledged by every in-sync replica before ``write`` returns, so the
driver's ``commit`` has nothing left to do but record that the batch is done;
it and ``abort`` are idempotent per (sink id, batch id).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from tritonmq.errors import ConfigError
from tritonmq.spark.options import SinkOptions
from tritonmq.spark.plan import record_uuid
from tritonmq.spark.remote import remote

log = logging.getLogger("tritonmq.spark")
BATCH_ID = "streaming.sql.batchId"
QUERY_ID = "sql.streaming.queryId"


@dataclass
class TritonMQCommitMessage(WriterCommitMessage):
    partition: int
    records: int


def _check(opts: SinkOptions, schema: StructType) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise ConfigError("the TritonMQ sink needs a 'value' column (binary or string)")
    if opts.topic is None and "topic" not in names:
        raise ConfigError("the TritonMQ sink needs a 'topic' column or option 'topic'")


def _bytes(v: Any, what: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, str):
        return v.encode()
    raise ConfigError(f"column {what!r} must be binary or string, not {type(v).__name__}")


def publish_rows(opts: SinkOptions, rows: Iterator[Row], sink_id: str, batch: str) -> int:
    """Publish a task's rows with replay-stable uuids; returns how many."""
    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    by_topic: dict[str, list[tuple[bytes, bytes, bytes | None, dict[str, Any] | None]]] = {}
    n = 0
    for i, row in enumerate(rows):
        d = row.asDict()
        topic = d.get("topic") or opts.topic
        if not topic:
            raise ConfigError(f"row {i} of partition {partition} has no topic")
        value = _bytes(d["value"], "value")
        if value is None:
            raise ConfigError(f"row {i} of partition {partition} has a null value")
        headers = d.get("headers")
        by_topic.setdefault(topic, []).append(
            (
                record_uuid(sink_id, batch, partition, i),
                value,
                _bytes(d.get("key"), "key"),
                dict(headers) if headers else None,
            )
        )
        n += 1
    r = remote(opts.url, opts.ca_file, opts.token_file, opts.zk_auth_file)
    for topic, records in by_topic.items():
        r.publish(topic, records, opts.durability)
    return n


class TritonMQStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        _check(opts, schema)
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> TritonMQCommitMessage:
        ctx = TaskContext.get()
        assert ctx is not None
        batch = ctx.getLocalProperty(BATCH_ID) or "0"
        sink_id = self.opts.sink_id or ctx.getLocalProperty(QUERY_ID) or "tritonmq"
        n = publish_rows(self.opts, iterator, sink_id, batch)
        return TritonMQCommitMessage(ctx.partitionId(), n)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        n = sum(m.records for m in messages if isinstance(m, TritonMQCommitMessage))
        log.info("batch %d: %d record(s) published to TritonMQ", batchId, n)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Published records cannot be taken back; Spark's retry of this batch reuses
        # their uuids, so the broker keeps each once.
        log.warning("batch %d aborted; a retry republishes it with the same uuids", batchId)


class TritonMQBatchWriter(DataSourceWriter):
    """A batch write: one write id per ``df.write`` (task retries reuse it)."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        _check(opts, schema)
        self.opts = opts
        self.write_id = f"{opts.sink_id or 'write'}-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[Row]) -> TritonMQCommitMessage:
        ctx = TaskContext.get()
        n = publish_rows(self.opts, iterator, self.write_id, "batch")
        return TritonMQCommitMessage(ctx.partitionId() if ctx else 0, n)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        n = sum(m.records for m in messages if isinstance(m, TritonMQCommitMessage))
        log.info("write %s: %d record(s) published to TritonMQ", self.write_id, n)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("write %s aborted; records already published stay", self.write_id)
