"""``tritonmq.spark`` without the spark extra: ``import tritonmq`` works, using it says why not."""

from __future__ import annotations

import subprocess
import sys

BLOCK_PYSPARK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pyspark', 'pyarrow'):
            raise ImportError(f'No module named {name!r}')
sys.meta_path.insert(0, Block())
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_PYSPARK + code], capture_output=True, text=True, timeout=60
    )


def test_import_tritonmq_needs_no_pyspark() -> None:
    done = run("import tritonmq, tritonmq.client, tritonmq.spark; print('ok')")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_using_the_connector_without_pyspark_says_what_to_install() -> None:
    done = run(
        "import tritonmq.spark\n"
        "from tritonmq.errors import ConfigError\n"
        "try:\n"
        "    tritonmq.spark.TritonMQDataSource\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'tritonmq[spark]'" in done.stdout
