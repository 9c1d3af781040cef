"""A Spark driver that dies the hard way: its JVM is SIGKILLed after the executors
published batch 0 to TritonMQ and before the sink's commit returns (test_sink's child).

Usage: python sink_driver.py ZK CHECKPOINT
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, concat, lit

from tests.spark.conftest import SPARK_CONF
from tritonmq.spark.options import sink_options
from tritonmq.spark.sink import TritonMQStreamWriter
from tritonmq.spark.source import TritonMQDataSource


class DyingWriter(TritonMQStreamWriter):
    def __init__(self, opts: Any, schema: Any, jvm_pid: int) -> None:
        super().__init__(opts, schema)
        self.jvm_pid = jvm_pid

    def commit(self, messages: Any, batchId: int) -> None:
        os.kill(self.jvm_pid, signal.SIGKILL)
        time.sleep(60)


class DyingSink(TritonMQDataSource):
    @classmethod
    def name(cls) -> str:
        return "tritonmq_dying"

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        return DyingWriter(sink_options(self.options), schema, int(self.options["jvmPid"]))


def main(zk: str, checkpoint: str) -> None:
    builder = SparkSession.builder.master("local[2]").appName("tritonmq-dying-driver")
    for k, v in SPARK_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.dataSource.register(TritonMQDataSource)
    spark.dataSource.register(DyingSink)
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    df = (
        spark.readStream.format("tritonmq")
        .option("zk", zk)
        .option("topics", "sink-in")
        .option("startingPosition", "earliest")
        .load()
        .select(concat(lit("out-"), col("value").cast("string")).alias("value"))
    )
    q = (
        df.writeStream.format("tritonmq_dying")
        .option("zk", zk)
        .option("topic", "sink-out")
        .option("jvmPid", str(jvm_pid))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
