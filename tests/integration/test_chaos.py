"""`tritonmq chaos`, as a user runs it: a short seeded run of real faults against a real
2 x 3 cluster, judged by its checker, and nothing it started left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import process_gone

pytestmark = pytest.mark.integration

SEED = 11
FAULTS = 12


def test_a_short_chaos_run_loses_duplicates_reorders_and_invents_nothing(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonmq",
            "chaos",
            "--seed",
            str(SEED),
            "--faults",
            str(FAULTS),
            "--duration",
            "120",
            "--json",
            str(out),
            "--workdir",
            str(tmp_path / "work"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, COLUMNS="200"),
    )
    assert out.exists(), f"no report; exit {run.returncode}:\n{run.stdout}\n{run.stderr}"
    report = json.loads(out.read_text())
    v = report["verdict"]
    # The table has exactly the documented columns, and the JSON the same figures.
    header = next(ln for ln in run.stdout.splitlines() if ln.startswith("┃"))
    cols = "faults acked lost dup order_violations phantom unknown longest_pause".split()
    assert [c for c in header.replace("┃", " ").split() if c] == cols
    assert list(v) == cols
    # The run really happened: the faults were done and records flowed through them.
    assert v["faults"] == FAULTS == len(report["fault_log"])
    assert v["acked"] > 1000 and report["details"]["deliveries"] >= 3 * v["acked"]
    assert report["details"]["final_heal_s"] is not None, "the cluster did not heal"
    # Every process it started is gone.
    assert report["details"]["pids"] and all(process_gone(p) for p in report["details"]["pids"])
    # The invariants, as the checker states them (the exit status must agree).
    d = report["details"]
    what = (
        f"seed {SEED}: {v}; per subscription: lost {d['lost_per_subscription']}, dup "
        f"{d['dup_per_subscription']}; by fault: {d['violations_by_fault']}; examples "
        f"{d['examples']} {d['lost_examples']}"
    )
    assert report["ok"] == (run.returncode == 0), run.stderr
    assert (v["lost"], v["dup"], v["order_violations"], v["phantom"]) == (0, 0, 0, 0), what
    assert run.returncode == 0
