"""The container image and docker/compose.yaml, run for real with podman and podman-compose.

Builds the image from a wheel of this checkout (scripts/image), brings the whole stack up
(3 ZooKeeper servers, `tritonmq init`, 2 groups x 3 brokers) under a project name of its
own, talks to it from the host through the published ports as a user would, kills a
primary's container and checks that nothing acknowledged was lost. Everything the stack
made (containers, volumes, network, image tag) is removed afterwards, also on failure;
the image stays tagged as BUILD_CACHE only, so that the next run rebuilds just what changed
(a cold build installs Debian's JRE: minutes).

Skipped when podman is not usable (`scripts/bootstrap --containers` installs it), except
under CI=true, where it fails instead: CI must run it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tritonmq import Client
from tritonmq.client.subscription import Subscription
from tritonmq.devtools.cluster import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker" / "compose.yaml"
BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
BUILD_CACHE = "localhost/tritonmq:test-build-cache"
ZOOKEEPERS = ("zk1", "zk2", "zk3")
BROKERS = tuple(f"g{g}-b{b}" for g in (1, 2) for b in (1, 2, 3))
PORT_VARS = {s: s.upper().replace("-", "_") + "_PORT" for s in ZOOKEEPERS + BROKERS}


def _podman_compose() -> str | None:
    beside = Path(sys.executable).parent / "podman-compose"  # bootstrap puts it in .venv
    return str(beside) if beside.is_file() else shutil.which("podman-compose")


def _unusable() -> str | None:
    """Why podman cannot run the stack here, or None when it can."""
    if shutil.which("podman") is None:
        return "podman is not installed (scripts/bootstrap --containers)"
    if _podman_compose() is None:
        return "podman-compose is not installed (scripts/bootstrap --containers)"
    if subprocess.run(["podman", "image", "exists", BASE_IMAGE]).returncode != 0:
        return f"no local {BASE_IMAGE} (scripts/bootstrap --containers builds it)"
    probe = subprocess.run(
        ["podman", "run", "--rm", BASE_IMAGE, "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"podman cannot run containers here: {probe.stderr.strip()[-300:]}"
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _run(*cmd: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    """Run a command; on failure raise with its output, so the test says what went wrong."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        )
    return p.stdout


class Stack:
    """One docker/compose.yaml project on podman: its name, ports and containers."""

    def __init__(self, tmp: Path, image: str) -> None:
        self.project = f"tmqtest{uuid.uuid4().hex[:8]}"
        self.image = image
        self.ports = dict(zip(PORT_VARS, _free_ports(len(PORT_VARS)), strict=True))
        secrets_dir = tmp / "secrets"
        self.env = {
            **os.environ,
            "TRITONMQ_IMAGE": self.image,
            "TRITONMQ_SECRETS_DIR": str(secrets_dir),
            **{PORT_VARS[s]: str(p) for s, p in self.ports.items()},
        }
        _run("bash", str(ROOT / "docker" / "secrets.sh"), str(secrets_dir))

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def url(self, service: str) -> str:
        return f"ws://127.0.0.1:{self.ports[service]}"

    def compose(self, *args: str, check: bool = True) -> str:
        return _run(
            _podman_compose() or "podman-compose",
            "-p",
            self.project,
            "-f",
            str(COMPOSE_FILE),
            *args,
            env=self.env,
            check=check,
        )

    def healthy(self, service: str) -> bool:
        """Run the service's own health check (podman schedules them only under systemd)."""
        return (
            subprocess.run(
                ["podman", "healthcheck", "run", self.container(service)], capture_output=True
            ).returncode
            == 0
        )

    def wait_healthy(self, services: tuple[str, ...], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = list(services)
        while pending:
            pending = [s for s in pending if not self.healthy(s)]
            if pending and time.monotonic() > deadline:
                logs = {
                    s: _run("podman", "logs", "--tail", "15", self.container(s), check=False)
                    for s in pending
                }
                raise AssertionError(f"not healthy within {timeout:.0f} s: {pending}\n{logs}")
            if pending:
                time.sleep(1)

    def leftovers(self) -> list[str]:
        label = f"label=io.podman.compose.project={self.project}"
        return (
            _run("podman", "ps", "-a", "-q", "--filter", label, check=False).split()
            + _run("podman", "volume", "ls", "-q", "--filter", label, check=False).split()
        )

    def remove(self) -> None:
        """Down, then remove by label whatever down left."""
        for service in BROKERS:  # pytest shows this only when the test failed
            tail = _run("podman", "logs", "--tail", "20", self.container(service), check=False)
            print(f"--- {service}\n{tail}")
        self.compose("down", "-v", "-t", "2", check=False)
        label = f"label=io.podman.compose.project={self.project}"
        for ctr in _run("podman", "ps", "-a", "-q", "--filter", label, check=False).split():
            _run("podman", "rm", "-f", "-t", "0", ctr, check=False)
        for vol in _run("podman", "volume", "ls", "-q", "--filter", label, check=False).split():
            _run("podman", "volume", "rm", "-f", vol, check=False)
        _run("podman", "network", "rm", "-f", f"{self.project}_default", check=False)


def _image_id(ref: str) -> str:
    return _run("podman", "image", "inspect", "--format", "{{.Id}}", ref, check=False).strip()


def _keep_as_build_cache(image: str) -> None:
    """Tag ``image`` as BUILD_CACHE; the image that tag named before goes (if unused)."""
    before = _image_id(BUILD_CACHE)
    _run("podman", "tag", image, BUILD_CACHE)
    if before and before != _image_id(image):
        _run("podman", "rmi", before, check=False)


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The image of this checkout, built once for the module under a tag of its own."""
    why = _unusable()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the container test: {why}")
        pytest.skip(why)
    tag = f"localhost/tritonmq:test-{uuid.uuid4().hex[:8]}"
    try:
        _run("bash", str(ROOT / "scripts" / "image"), "--tag", tag)
        _keep_as_build_cache(tag)
        yield tag
    finally:
        _run("podman", "rmi", "-f", tag, check=False)


@pytest.fixture
def stack(image: str, tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path, image)
    try:
        s.compose("up", "-d")
        s.wait_healthy(ZOOKEEPERS + BROKERS, timeout=240)
        init = _run("podman", "inspect", "--format", "{{.State.ExitCode}}", s.container("init"))
        assert init.strip() == "0", "tritonmq init did not succeed"
        yield s
    finally:
        s.remove()
    assert s.leftovers() == [], "the stack left containers or volumes behind"


_DIGEST = """
import hashlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
for f in sorted(root.rglob("*.py")):
    print(f.relative_to(root), hashlib.sha256(f.read_bytes()).hexdigest())
"""


def test_image_holds_exactly_the_checkouts_package(image: str) -> None:
    """Every module of the checkout, byte for byte, and nothing else: what was tested."""
    here = _run(sys.executable, "-c", _DIGEST, str(ROOT / "tritonmq"))
    site = "/opt/tritonmq/lib/python3.11/site-packages/tritonmq"
    there = _run("podman", "run", "--rm", "--entrypoint", "python3", image, "-c", _DIGEST, site)
    differ = set(here.splitlines()) ^ set(there.splitlines())
    assert sorted({line.split()[0] for line in differ}) == [], "image differs from the checkout"
    assert _run("podman", "run", "--rm", image, "--version").startswith("tritonmq, version")


async def _topic_of(client: Client, group: str) -> str:
    for i in range(1000):
        if client.group_of(f"orders-{i}") == group:
            return f"orders-{i}"
    raise AssertionError(f"no topic maps to {group}")


async def test_stack_from_the_host_loses_nothing_acknowledged_when_a_primary_is_killed(
    stack: Stack,
) -> None:
    delivered: dict[str, list[bytes]] = {}
    acked: dict[str, list[bytes]] = {}

    async def consume(sub: Subscription, topic: str) -> None:
        async for msg in sub:
            delivered[topic].append(msg.value)
            await msg.ack()

    async def publish(client: Client, topic: str, phase: str, n: int) -> None:
        values = [f"{phase}-{i}".encode() for i in range(n)]
        acks = await client.publish_many(topic, values)
        assert len(acks) == n
        acked[topic].extend(values)

    # Bootstrap from group g2's broker: the one killed below is g1's primary.
    async with Client(stack.url("g2-b2"), timeout=60) as client, AsyncExitStack() as subs:
        topics = [await _topic_of(client, "g1"), await _topic_of(client, "g2")]
        # What an operator checks first (`tritonmq status`): every group has its 3 replicas
        # in sync, so that one killed container leaves min_insync = 2 of them.
        deadline = time.monotonic() + 120
        for group in ("g1", "g2"):
            while len((meta := await client.group_meta(group)).isr) < 3:
                assert time.monotonic() < deadline, f"{group}'s ISR stays {meta.isr}"
                await asyncio.sleep(0.5)
        old = (await client.group_meta("g1")).broker
        consumers = []
        for t in topics:
            delivered[t], acked[t] = [], []
            # A named (durable) subscription keeps every record it has not acknowledged.
            sub = client.subscribe(t, subscription="containers", from_="earliest")
            await subs.enter_async_context(sub)
            consumers.append(asyncio.create_task(consume(sub, t)))

        for t in topics:
            await publish(client, t, "before", 300)
        await asyncio.to_thread(
            _run, "podman", "kill", "--signal", "KILL", stack.container(f"g1-{old}")
        )
        for t in topics:
            await publish(client, t, "after", 300)

        new = (await client.group_meta("g1")).broker
        assert new != old, f"g1's primary {old} was killed but still leads"
        await asyncio.to_thread(
            wait_for,
            lambda: all(set(delivered[t]) >= set(acked[t]) for t in topics),
            60,
            "every acknowledged record to be delivered",
        )
        for c in consumers:
            c.cancel()
    for t in topics:
        assert len(acked[t]) == 600
        assert set(delivered[t]) >= set(acked[t])
