"""Rows/s through the TritonMQ source into Spark's no-op sink, beside the ceiling of the
Python Data Source API here: a trivial in-memory source of the same rows, in the same run.

``python -m tritonmq.spark.bench [--records 500000] [--batch 100000] [--rounds 2] [--json F]``
starts its own ZooKeeper and one broker, publishes the records, then runs both
queries, alternately, ``--rounds`` times each, with ``maxRecordsPerTrigger`` =
``--batch`` and ``trigger(availableNow=True)``. Rows/s is rows over the summed
trigger time of every batch but the first (warm-up); the best round of each counts,
which is the least disturbed by whatever else the machine runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from tritonmq.spark.source import SCHEMA

VALUE = b"x" * 100
PUBLISHED = pa.timestamp("us", tz="UTC")


class MemoryRange(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end


class MemoryReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Rows ``0..total`` of the source's schema, built in memory as Arrow columns: the least
    a Python data source can do per row, so the API's ceiling."""

    def __init__(self, total: int, batch: int) -> None:
        self.total = total
        self.batch = batch

    def initialOffset(self) -> dict[str, int]:
        return {"i": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.batch)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        n = limit.max_rows if isinstance(limit, ReadMaxRows) else self.total
        return {"i": min(self.total, start["i"] + n)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        mid = (start["i"] + end["i"]) // 2
        return [MemoryRange(start["i"], mid), MemoryRange(mid, end["i"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, MemoryRange)
        uuid = os.urandom(16).hex()
        for lo in range(partition.start, partition.end, 10_000):
            n = min(partition.end, lo + 10_000) - lo
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(["bench"] * n, pa.string()),
                    pa.array(["g1"] * n, pa.string()),
                    pa.array(range(lo + 1, lo + n + 1), pa.int64()),
                    pa.array([uuid] * n, pa.string()),
                    pa.nulls(n, pa.binary()),
                    pa.array([VALUE] * n, pa.binary()),
                    pa.array([1_700_000_000_000_000] * n, PUBLISHED),
                ],
                names=["topic", "group", "ts", "uuid", "key", "value", "published"],
            )


class MemorySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "tritonmq_bench_memory"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return MemoryReader(int(self.options["total"]), int(self.options["batch"]))


def rows_per_second(query: Any) -> tuple[float, int]:
    """Rows over trigger time, every batch but the first (which pays for warm-up)."""
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0][1:]
    rows = sum(p["numInputRows"] for p in batches)
    ms = sum(p["durationMs"]["triggerExecution"] for p in batches)
    return (rows / (ms / 1000) if ms else 0.0), rows


def run_query(spark: Any, df: Any, workdir: str, name: str) -> tuple[float, int]:
    """Run to the end; a query whose planner process could not start in Spark's fixed 10 s
    (a starved machine) is started again, at most three times."""
    for attempt in range(3):
        q = (
            df.writeStream.format("noop")
            .option("checkpointLocation", os.path.join(workdir, f"{name}-{attempt}"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination()
        except Exception as e:
            if "failed to connect back" not in str(e) or attempt == 2:
                raise
            print(f"{name}: Spark's Python worker did not start in time; again", file=sys.stderr)
            continue
        return rows_per_second(q)
    raise AssertionError("unreachable")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import tritonmq.spark
    from tritonmq.client import SyncClient
    from tritonmq.devtools.cluster import DevCluster

    with tempfile.TemporaryDirectory(prefix="tritonmq-spark-bench-") as workdir:
        config = os.path.join(workdir, "broker.toml")
        with open(config, "w") as f:
            f.write("[broker]\nretention_s = 3600.0\nmin_insync = 1\n")
        with DevCluster(1, 1, workdir=os.path.join(workdir, "cluster"), config=config) as c:
            zk = f"{c.zk_hosts}{c.chroot}"
            with SyncClient(f"zk://{zk}") as client:
                for i in range(0, args.records, 10_000):
                    client.publish_many("bench", [VALUE] * min(10_000, args.records - i))
            spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "1")
                .config("spark.driver.memory", "512m")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            tritonmq.spark.register(spark)
            spark.dataSource.register(MemorySource)

            def memory() -> Any:
                return (
                    spark.readStream.format("tritonmq_bench_memory")
                    .option("total", str(args.records))
                    .option("batch", str(args.batch))
                    .load()
                )

            def source() -> Any:
                return (
                    spark.readStream.format("tritonmq")
                    .option("zk", zk)
                    .option("topics", "bench")
                    .option("startingPosition", "earliest")
                    .option("maxRecordsPerTrigger", str(args.batch))
                    .load()
                )

            started = time.time()
            rounds: dict[str, list[float]] = {"memory": [], "tritonmq": []}
            rows = {}
            for i in range(args.rounds):
                for name, df in (("memory", memory()), ("tritonmq", source())):
                    rate, rows[name] = run_query(spark, df, workdir, f"{name}-{i}")
                    rounds[name].append(round(rate))
            spark.stop()
    ceiling, ours = max(rounds["memory"]), max(rounds["tritonmq"])
    result = {
        "records": args.records,
        "batch": args.batch,
        "memory_rows_per_s": ceiling,
        "tritonmq_rows_per_s": ours,
        "ratio": round(ours / ceiling, 3) if ceiling else None,
        "rounds": rounds,
        "measured_rows": rows,
        "seconds": round(time.time() - started, 1),
    }
    print(json.dumps(result, indent=2))
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
