"""Ingest TritonMQ topics into Parquet with Spark Structured Streaming, exactly once.

Start a local cluster (it prints ``zookeeper HOST:PORT``), then the pipeline (needs
``pip install 'tritonmq[spark]'``), then publish::

    tritonmq dev
    python clients/examples/spark_ingest.py --zk HOST:PORT --topics orders \\
        --out /tmp/orders.parquet --checkpoint /tmp/orders.checkpoint
    tritonmq pub orders '{"id": 1}' --zk HOST:PORT

A dev cluster keeps a record only while a subscription needs it: the pipeline's
own durable subscription (registered when it starts) keeps everything it has
not committed, so start it before publishing (or give the broker a retention).

Stop it with Ctrl-C and start it again with the same ``--checkpoint``: it goes on
where it stopped, with nothing lost (the broker kept what Spark had not
committed) and nothing twice (Parquet's file sink and the offsets commit together).
``--once`` reads what is there now and exits (``trigger(availableNow=True)``).
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--zk", default="127.0.0.1:2181", help="ZooKeeper host:port[/chroot]")
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
    records = (
        spark.readStream.format("tritonmq")
        .option("zk", args.zk)
        .option("topics", args.topics)
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
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    print(f"{spark.read.parquet(args.out).count()} records in {args.out}")
    spark.stop()


if __name__ == "__main__":
    main()
