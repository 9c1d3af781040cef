"""Spark Structured Streaming source and sink for TritonMQ (PySpark's Python Data Source API).

``tritonmq.spark.register(spark)`` then ``spark.readStream.format("tritonmq")`` or
``df.writeStream.format("tritonmq")``; see docs/spark.md. Needs the ``spark`` extra
(``pip install 'tritonmq[spark]'``: pyspark and pyarrow); ``import tritonmq`` never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tritonmq.errors import ConfigError

if TYPE_CHECKING:
    from tritonmq.spark.source import TritonMQDataSource

__all__ = ["TritonMQDataSource", "register"]

MISSING = (
    "the TritonMQ Spark connector needs pyspark (4.0 or later) and pyarrow:"
    " pip install 'tritonmq[spark]'"
)


def _source_module() -> Any:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"{MISSING} ({e})") from None
    from tritonmq.spark import source

    return source


def register(spark: Any) -> None:
    """Make ``format("tritonmq")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(_source_module().TritonMQDataSource)


def __getattr__(name: str) -> Any:
    if name == "TritonMQDataSource":
        return _source_module().TritonMQDataSource
    raise AttributeError(name)
