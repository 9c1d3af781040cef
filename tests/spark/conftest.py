"""One local SparkSession for the whole Spark test run, plus real clusters (real ZooKeeper,
real broker processes) from the integration fixtures."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import make_cluster, zk_url  # noqa: F401  (fixture)
from tritonmq.devtools.cluster import DevCluster

# What NOTES.md measured keeps a local session quick and small on a 2-core machine.
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.driver.memory": "512m",
    "spark.sql.streaming.stopTimeout": "60s",
    "spark.sql.adaptive.enabled": "false",
}


def spark_env() -> dict[str, str]:
    """Workers must run this environment's python, and find this checkout."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": root + (os.pathsep + path if path else ""),
    }


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    from pyspark.sql import SparkSession

    import tritonmq.spark

    os.environ.update(spark_env())
    local_dir = tmp_path_factory.mktemp("spark-local")
    builder = SparkSession.builder.master("local[2]").appName("tritonmq-tests")
    for k, v in {**SPARK_CONF, "spark.local.dir": str(local_dir)}.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    tritonmq.spark.register(session)
    yield session
    session.stop()
    shutil.rmtree(local_dir, ignore_errors=True)


def wait_until(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def zk_option(c: DevCluster) -> str:
    return f"{c.zk_hosts}{c.chroot}"
