"""`tritonmq bench --against nats,redis --quick` as a user runs it: the real binary, real
nats-server and redis-server child processes. It keeps the harness working; it measures
nothing (CI does not run the benchmark itself). Skipped where the peers are not installed
(`scripts/bootstrap --bench` installs them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
TRITONMQ = [sys.executable, "-m", "tritonmq"]

MISSING = [b for b in ("nats-server", "redis-server") if shutil.which(b) is None] + [
    f"python package {m}" for m in ("nats", "redis", "hiredis") if find_spec(m) is None
]
needs_peers = pytest.mark.skipif(
    bool(MISSING),
    reason=f"{', '.join(MISSING)} not installed: the peers come with scripts/bootstrap --bench",
)

SYSTEMS = ("TritonMQ 1x3", "NATS JetStream R3", "Redis + 2 replicas")
RATIOS = ("TritonMQ / NATS", "TritonMQ / Redis")
SHAPES = (
    "single publish at",
    "batches of 100",
    "end to end 1->1",
    "fan-out 1->10",
    "256 concurrent publishers",
)


def _cells(line: str) -> list[str]:
    """A rich table row's cells (its box characters between them)."""
    return [c.strip() for c in line.strip().strip("│┃").replace("┃", "│").split("│")]


@needs_peers
def test_quick_bench_against_nats_and_redis_prints_a_row_per_shape_and_a_column_per_system(
    tmp_path: Path,
) -> None:
    out = tmp_path / "peers.json"
    args = ["bench", "--against", "nats,redis", "--quick", "--json", str(out)]
    r = subprocess.run([*TRITONMQ, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()

    [header] = [line for line in lines if "measure" in line]
    assert _cells(header) == ["measure", *SYSTEMS, *RATIOS]
    for shape in SHAPES:
        rows = [_cells(line) for line in lines if shape in line]
        assert rows, f"no row for {shape!r} in:\n{r.stdout}"
        for row in rows:
            assert len(row) == 1 + len(SYSTEMS) + len(RATIOS), row
            for cell in row[1:]:  # every system measured, every ratio computed
                assert float(cell.replace(",", "")) > 0, row

    data = json.loads(out.read_text())
    assert [run["system"] for run in data["runs"]] == ["tritonmq", "nats", "redis"]  # one round
    for system in ("tritonmq", "nats", "redis"):
        assert data["median"][system]["batches_msgs_per_s"] > 0
        assert data["median"][system]["single_p50_ms"] <= data["median"][system]["single_p99_ms"]


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--against", "kafka"],
        ["bench", "--against", "nats,nats"],
        ["bench", "--quick"],
        ["bench", "--against", "nats", "--groups", "1,2"],
    ],
)
def test_bad_peer_options_exit_2_with_a_message(args: list[str]) -> None:
    r = subprocess.run([*TRITONMQ, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.strip()
