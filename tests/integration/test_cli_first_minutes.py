"""Issue 27, the first five minutes: what the README tells a newcomer to type, through the
real `tritonmq` binary against a real `tritonmq dev`."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tritonmq.devtools.cluster import wait_for

pytestmark = pytest.mark.integration
TRITONMQ = str(Path(sys.executable).parent / "tritonmq")  # the console script, as installed


def read_until(stream: IO[str], want: str, timeout: float) -> list[str]:
    """Lines of ``stream`` up to the first that contains ``want``; TimeoutError (with what
    was read) if none does within ``timeout`` seconds or the stream ends first."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(left):
                break
            line = stream.readline()
            if not line:
                break
            lines.append(line)
            if want in line:
                return lines
    raise TimeoutError(f"no line with {want!r} within {timeout:.0f}s; read {lines!r}")


class Dev:
    """`tritonmq dev` as a user runs it, stopped with SIGTERM (it must exit 0)."""

    def __init__(self, tmp: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.state_file = tmp / "state.json"
        self.proc = subprocess.Popen(
            [TRITONMQ, "dev", "--state-file", str(self.state_file), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        wait_for(lambda: self.state_file.exists() or self.proc.poll() is not None, 90, "dev")
        if self.proc.poll() is not None:
            raise AssertionError(f"tritonmq dev exited: {self.proc.communicate()}")
        self.state = json.loads(self.state_file.read_text())

    @property
    def env(self) -> dict[str, str]:
        """What the `export` line `dev` prints gives another shell."""
        return {**os.environ, "TRITONMQ_ZK_AUTH_FILE": self.state["zk_auth_file"]}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0, self.proc.communicate()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRITONMQ, *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    # A probe topic that keeps nothing (retention_s itself is left to `dev`): once its
    # record is purged, a purge cycle has passed the one the test publishes.
    config = tmp_path / "broker.toml"
    config.write_text("[broker.topic_retention]\nprobe = 0.0\n")
    d = Dev(tmp_path, "--config", str(config))
    yield d
    d.stop()


def wait_purge_cycle(dev: Dev) -> None:
    """Until a record of the probe topic (retention 0, nobody subscribed) is purged: the
    brokers purge nothing for ephemeral_grace (10 s) after an election, then every topic
    as its retention allows in each cycle."""
    zk = dev.state["zk"]
    assert cli("pub", "--zk", zk, "probe", "x", env=dev.env).returncode == 0

    def purged() -> bool:
        out = cli("topics", "probe", "--zk", zk, "--json", env=dev.env)
        assert out.returncode == 0, out.stderr
        return all(row["records"] == 0 for row in json.loads(out.stdout))

    wait_for(purged, 60, "the probe topic's record to be purged", 0.5)


def test_the_readmes_pub_then_sub_shows_the_record_and_says_it_waits(dev: Dev) -> None:
    """`tritonmq pub chat hello`, then `tritonmq sub chat --from earliest`: the record was
    purged at once (retention_s = 0) and sub printed nothing, not even that it waited."""
    zk = dev.state["zk"]
    published = cli("pub", "--zk", zk, "chat", "hello", env=dev.env)
    assert published.returncode == 0, published.stderr
    ts = published.stdout.split("ts=")[1].split()[0]
    wait_purge_cycle(dev)
    sub = subprocess.Popen(
        [TRITONMQ, "sub", "--zk", zk, "chat", "--from", "earliest"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dev.env,
    )
    try:
        assert sub.stderr is not None and sub.stdout is not None
        said = read_until(sub.stderr, "waiting", 30)
        assert "subscribed to chat from earliest" in said[-1]
        assert read_until(sub.stdout, "hello", 30) == [f"{ts}\thello\n"]  # flushed at once
    finally:
        sub.send_signal(signal.SIGINT)
        sub.wait(timeout=30)
