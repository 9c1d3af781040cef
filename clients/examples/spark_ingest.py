"""Ingest TritonMQ topics into Parquet with Spark Structured Streaming, exactly once.

Start a local cluster, then the pipeline (needs ``pip install 'tritonmq[spark]'``), then
publish::

    tritonmq dev
    python clients/examples/spark_ingest.py --topics orders \\
        --out /tmp/orders.parquet --checkpoint /tmp/orders.checkpoint
    tritonmq pub orders '{"id": 1}'

Without ``--zk`` it reads the cluster `tritonmq dev` runs (its local context), with that
cluster's ZooKeeper credential. Elsewhere give ``--zk HOST:PORT`` and ``--zk-auth-file`` (or
``$TRITONMQ_ZK_AUTH_FILE``): the file holding the cluster's credential, ``user:password``.

`tritonmq dev` keeps records an hour, and the pipeline's own durable subscription
(registered when it starts) keeps everything it has not committed, whatever the
brokers' retention.

Stop it with Ctrl-C and start it again with the same ``--checkpoint``: it goes on
where it stopped, with nothing lost (the broker kept what Spark had not
committed) and nothing twice (Parquet's file sink and the offsets commit together).
``--once`` reads what is there now and exits (``trigger(availableNow=True)``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument(
        "--zk", default=None, help="ZooKeeper host:port[/chroot] (default: tritonmq dev's)"
    )
    ap.add_argument(
        "--zk-auth-file",
        default=None,
        help="the cluster's ZooKeeper credential (default: $TRITONMQ_ZK_AUTH_FILE, tritonmq dev's)",
    )
    ap.add_argument("--topics", default="orders", help="comma-separated topics")
    ap.add_argument("--out", default="/tmp/tritonmq-ingest/data")
    ap.add_argument("--checkpoint", default="/tmp/tritonmq-ingest/checkpoint")
    ap.add_argument("--starting", default="earliest", help="earliest, latest or JSON")
    ap.add_argument("--once", action="store_true", help="read what is there now, then stop")
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this python
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col

    import tritonmq.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tritonmq-ingest")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    tritonmq.spark.register(spark)
    reader = spark.readStream.format("tritonmq")
    if args.zk:
        reader = reader.option("zk", args.zk)
    if args.zk_auth_file:
        reader = reader.option("zkAuthFile", args.zk_auth_file)
    records = (
        reader.option("topics", args.topics)
        .option("startingPosition", args.starting)
        .load()
        .withColumn("value", col("value").cast("string"))
    )
    writer = (
        records.writeStream.format("parquet")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
        .partitionBy("topic")
    )
    query = (
        writer.trigger(availableNow=True)
        if args.once
        else writer.trigger(processingTime="1 second")
    ).start()
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))  # see detached()
    while not stop and query.isActive:
        query.awaitTermination(1)  # seconds; a Ctrl-C never lands inside a call into Spark
    if stop:
        spark.sparkContext.setLogLevel("OFF")  # the stop may cancel a running batch: not an error
        query.stop()
        spark.stop()
        print("stopped; start it again with the same --checkpoint to go on", file=sys.stderr)
        sys.exit(130)
    print(f"{spark.read.parquet(args.out).count()} records in {args.out}")
    spark.stop()


def detached(run: Callable[[], None]) -> None:
    """Run ``run`` in a child process in a session of its own, and pass Ctrl-C to it alone.

    A terminal sends Ctrl-C's SIGINT to every process of its foreground group, and Spark's
    Python workers are in it: each would die in the middle of its task, and the JVM and
    PySpark would print pages of tracebacks. Here only this parent gets it, and tells the
    child, which stops the query and Spark in order and exits 130."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        code = 0
        try:
            run()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: os.kill(pid, signal.SIGINT))
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    detached(main)
