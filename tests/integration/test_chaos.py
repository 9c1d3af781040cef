"""`tritonmq chaos`, as a user runs it: a short seeded run of real faults against a real
2 x 3 cluster, judged by its checker, and nothing it started left running."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import SHOWABLE_TRITONMQ, process_gone, show_and_kill

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
        env=dict(os.environ, COLUMNS="80"),
    )
    assert out.exists(), f"no report; exit {run.returncode}:\n{run.stdout}\n{run.stderr}"
    report = json.loads(out.read_text())
    v = report["verdict"]
    # The table has exactly the documented columns, and the JSON the same figures.
    cols = "faults acked lost dup order_violations phantom unknown longest_pause".split()
    lines = run.stdout.splitlines()
    row = lines[next(i for i, ln in enumerate(lines) if ln.split() == cols) + 2].split()
    assert row[:-1] == [f"{v[c]:,}" for c in cols[:-1]] and row[-1].endswith("s")
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


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


def children(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def test_ctrl_c_stops_every_process_the_run_started(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *SHOWABLE_TRITONMQ,
            "chaos",
            "--seed",
            "5",
            "--duration",
            "300",
            "--workdir",
            str(tmp_path / "work"),
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started: set[int] = set()
    try:
        # ZooKeeper and 6 brokers up, and the nemesis at work (a fault logged).
        deadline = time.monotonic() + 120
        while len(started) < 7 or not (tmp_path / "work" / "g1b1.log").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"only {len(started)} processes started"
            started |= children(proc.pid)
            time.sleep(0.2)
        time.sleep(5)
        started |= children(proc.pid)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            started |= children(proc.pid)  # before it dies: its orphans are nobody's children
            err = show_and_kill(proc)
            alive = {p: cmdline(p) for p in started if not process_gone(p)}
            pytest.fail(f"no exit 120 s after SIGINT; still alive: {alive}\nstderr:\n{err}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in started:  # a run that failed to stop them must not leave them to the next test
            if not process_gone(p):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert all(process_gone(p) for p in started), [p for p in started if not process_gone(p)]
