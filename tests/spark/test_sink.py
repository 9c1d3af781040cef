"""The Spark sink against a real local Spark, real ZooKeeper and real broker processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.functions import col, concat, lit

from tests.spark.conftest import spark_env, zk_option
from tritonmq.devtools.cluster import DevCluster
from tritonmq.spark.remote import Remote

# Real Spark on 2 shared cores: a test can take minutes (the driver-kill test starts a
# second Spark). The limit only stops a hung run; it asserts nothing about speed.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]
DRIVER = Path(__file__).with_name("sink_driver.py")


def values_of(admin: Remote, topic: str) -> list[bytes]:
    head = admin.heads([admin.client.group_of(topic)])[admin.client.group_of(topic)]
    return [r[3] for got in admin.pages(topic, 0, head, 10_000) for r in got.records]


def test_a_batch_replayed_after_the_driver_died_before_commit_lands_once(
    spark: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    c = make_cluster(replicas=2, settings={"retention_s": 600.0})
    admin = Remote(f"zk://{zk_option(c)}")
    try:
        admin.call(admin.client.publish_many("sink-in", [b"%04d" % i for i in range(1000)]))
        checkpoint = tmp_path / "checkpoint"
        child = subprocess.run(
            [sys.executable, str(DRIVER), zk_option(c), str(checkpoint)],
            # A SIGKILLed driver leaves its scratch directories behind: keep them in tmp_path.
            env={
                **os.environ,
                **spark_env(),
                "SPARK_LOCAL_DIRS": str(tmp_path / "local"),
                "_JAVA_OPTIONS": f"-Djava.io.tmpdir={tmp_path}",
            },
            capture_output=True,
            timeout=600,
        )
        assert child.returncode != 0, child.stderr.decode()[-2000:]
        # The executors published batch 0, the driver died before committing it.
        assert (checkpoint / "offsets" / "0").exists()
        assert not (checkpoint / "commits" / "0").exists()
        want = sorted(b"out-%04d" % i for i in range(1000))
        assert sorted(values_of(admin, "sink-out")) == want

        df = (
            spark.readStream.format("tritonmq")
            .option("zk", zk_option(c))
            .option("topics", "sink-in")
            .option("startingPosition", "earliest")
            .load()
            .select(concat(lit("out-"), col("value").cast("string")).alias("value"))
        )
        q = (
            df.writeStream.format("tritonmq")
            .option("zk", zk_option(c))
            .option("topic", "sink-out")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(300)
        assert q.exception() is None
        replayed = [p for p in q.recentProgress if p["batchId"] == 0]
        assert replayed and replayed[0]["numInputRows"] == 1000  # Spark did replay it
        got = values_of(admin, "sink-out")
        assert max(Counter(got).values()) == 1 and sorted(got) == want
    finally:
        admin.close()
