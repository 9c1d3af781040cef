"""Issue 27, the first five minutes: what the README tells a newcomer to type, through the
real `tritonmq` binary against a real `tritonmq dev`."""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tritonmq.devtools.cluster import taken_ports, wait_for

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


def free_block(n: int) -> int:
    """The first of ``n`` consecutive loopback ports nothing listens on now (a test's
    `tritonmq dev --port`, clear of the default ones and of other tests')."""
    for _ in range(200):
        base = random.randrange(20000, 30000)
        if not taken_ports(list(range(base, base + n))):
            return base
    raise AssertionError(f"no {n} free consecutive ports")


def without_cluster_env(context: Path) -> dict[str, str]:
    """The environment of a new shell: no cluster, no credential named; the context file
    ``context`` (what $XDG_STATE_HOME would give a user, in the test's directory)."""
    drop = ("TRITONMQ_ZK", "TRITONMQ_URL", "TRITONMQ_CA_FILE", "TRITONMQ_CONTEXT")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["TRITONMQ_CONTEXT"] = str(context)
    return env


class Dev:
    """`tritonmq dev --port BASE` as a user runs it, with its context in the test's
    directory, stopped with SIGTERM (it must exit 0)."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.state_file = tmp / "state.json"
        self.context = tmp / "state" / "tritonmq" / "context.json"
        self.env = without_cluster_env(self.context)
        self.port = free_block(4)
        self.proc = subprocess.Popen(
            [TRITONMQ, "dev", "--port", str(self.port), "--state-file", str(self.state_file)]
            + list(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        wait_for(lambda: self.state_file.exists() or self.proc.poll() is not None, 90, "dev")
        if self.proc.poll() is not None:
            raise AssertionError(f"tritonmq dev exited: {self.proc.communicate()}")
        self.state = json.loads(self.state_file.read_text())

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
    assert cli("pub", "probe", "x", env=dev.env).returncode == 0

    def purged() -> bool:
        out = cli("topics", "probe", "--json", env=dev.env)
        assert out.returncode == 0, out.stderr
        return all(row["records"] == 0 for row in json.loads(out.stdout))

    wait_for(purged, 60, "the probe topic's record to be purged", 0.5)


def test_the_readmes_pub_then_sub_shows_the_record_and_says_it_waits(dev: Dev) -> None:
    """`tritonmq pub chat hello`, then `tritonmq sub chat --from earliest`: the record was
    purged at once (retention_s = 0) and sub printed nothing, not even that it waited."""
    published = cli("pub", "chat", "hello", env=dev.env)
    assert published.returncode == 0, published.stderr
    ts = published.stdout.split("ts=")[1].split()[0]
    wait_purge_cycle(dev)
    sub = subprocess.Popen(
        [TRITONMQ, "sub", "chat", "--from", "earliest"],
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


def test_bare_sub_and_pub_against_tritonmq_dev(tmp_path: Path) -> None:
    """As with nats-server and `nats sub`/`nats pub`: no flags, no exports. `tritonmq dev`
    listens on fixed ports and writes the local context every command reads."""
    dev = Dev(tmp_path)
    try:
        base = dev.port
        ctx = json.loads(dev.context.read_text())
        assert ctx["zk"] == f"127.0.0.1:{base}" and ctx["pid"] == dev.proc.pid
        assert [b["url"] for b in ctx["brokers"]] == [
            f"ws://127.0.0.1:{base + i}" for i in (1, 2, 3)
        ]
        sub = subprocess.Popen(
            [TRITONMQ, "sub", "chat"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dev.env,
        )
        try:
            assert sub.stderr is not None and sub.stdout is not None
            read_until(sub.stderr, "waiting", 30)
            published = cli("pub", "chat", "hello", env=dev.env)
            assert published.returncode == 0, published.stderr
            assert read_until(sub.stdout, "hello", 30)[-1].endswith("\thello\n")
        finally:
            sub.send_signal(signal.SIGINT)
            sub.wait(timeout=30)
        status = cli("status", "--json", env=dev.env)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["groups"]["g1"]["primary"] is not None
        topics = cli("topics", "chat", "--json", env=dev.env)
        assert topics.returncode == 0 and json.loads(topics.stdout)[0]["records"] == 1

        # a flag, then its environment variable, wins over the context
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            nowhere = f"127.0.0.1:{s.getsockname()[1]}"
        flag = cli("pub", "--zk", nowhere, "chat", "x", env=dev.env)
        assert flag.returncode == 2 and f"cannot reach ZooKeeper at {nowhere}" in flag.stderr
        by_env = cli("pub", "chat", "x", env={**dev.env, "TRITONMQ_ZK": nowhere})
        assert by_env.returncode == 2 and nowhere in by_env.stderr, by_env.stderr
    finally:
        dev.stop()
    assert not dev.context.exists()  # removed by the dev that wrote it
    gone = cli("status", env=dev.env)  # no context: the old default, which nothing serves
    assert gone.returncode == 2 and "127.0.0.1:2181" in gone.stderr


def test_dev_refuses_a_taken_port_with_status_2(tmp_path: Path) -> None:
    base = free_block(4)
    with socket.socket() as s:
        s.bind(("127.0.0.1", base + 2))  # the second broker's
        s.listen()
        env = without_cluster_env(tmp_path / "context.json")
        r = subprocess.run(
            [TRITONMQ, "dev", "--port", str(base)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"port {base + 2}" in r.stderr and "--port" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "context.json").exists()


def test_a_context_left_by_a_dev_that_is_gone_is_named_with_status_2(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    context = tmp_path / "context.json"
    context.write_text(json.dumps({"zk": "127.0.0.1:1", "chroot": "/tritonmq",
                                   "zk_auth_file": str(tmp_path / "zk.auth"),
                                   "pid": int(ended.stdout)}))  # fmt: skip
    r = cli("status", env=without_cluster_env(context))
    assert r.returncode == 2 and "no longer running" in r.stderr and str(context) in r.stderr
    bad = context.with_name("bad.json")
    bad.write_text("{not json")
    r = cli("pub", "chat", "x", env=without_cluster_env(bad))
    assert r.returncode == 2 and "not a tritonmq context file" in r.stderr


def readme_python_snippet() -> str:
    """The README's first Python example, verbatim."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    after = readme.split("From Python:", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_python_snippet_runs_as_a_script_against_tritonmq_dev(tmp_path: Path) -> None:
    """It was a SyntaxError as a script (a top-level `async with`) and dialled a port
    `tritonmq dev` does not use."""
    script = tmp_path / "snippet.py"
    script.write_text(readme_python_snippet())
    dev = Dev(tmp_path)
    try:
        r = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=dev.env, timeout=60
        )
    finally:
        dev.stop()
    assert r.returncode == 0, r.stderr
    published, received = r.stdout.splitlines()
    assert published.startswith("published Ack(topic='chat'") and received.endswith(" b'hello'")


@pytest.fixture(scope="module")
def shared_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    """One `tritonmq dev` for the tests below that only publish and subscribe (each on
    topics of its own)."""
    d = Dev(tmp_path_factory.mktemp("shared-dev"))
    yield d
    d.stop()


def a_port_nothing_listens_on() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


ZK_COMMANDS = [
    ["status"],
    ["pub", "chat", "x"],
    ["sub", "chat"],
    ["topics"],
    ["subscriptions"],
    ["top", "--once"],
    ["slots", "show"],
    ["rebalance"],
]


@pytest.mark.parametrize("args", ZK_COMMANDS, ids=lambda a: " ".join(a))
def test_a_refused_zookeeper_is_one_line_and_status_2_at_once(
    args: list[str], tmp_path: Path
) -> None:
    """It took 6-13 s of kazoo retries, printed 6-8 kazoo log lines, said "time-out" for a
    refused connection, and exited 1 or 2 depending on the command."""
    where = f"127.0.0.1:{a_port_nothing_listens_on()}"
    env = without_cluster_env(tmp_path / "context.json")
    started = time.monotonic()
    r = cli(*args, "--zk", where, env=env)
    took = time.monotonic() - started
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"Error: cannot reach ZooKeeper at {where}: connection refused"
    ]
    assert took < 5, f"{took:.1f}s"  # a Python start-up, not a connection policy's retries


def test_something_that_is_not_zookeeper_is_named_quickly(tmp_path: Path) -> None:
    """A port that accepts and says nothing (a wrong port), and one that answers as
    something else: both "cannot reach ZooKeeper", status 2, without kazoo's lines."""
    env = without_cluster_env(tmp_path / "context.json")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        where = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        r = cli("status", "--zk", where, env=env)
        took = time.monotonic() - started
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"Error: cannot reach ZooKeeper at {where}: not ZooKeeper (no handshake within 2s)"
    ]
    assert took < 7, f"{took:.1f}s"


def test_a_brokers_port_given_as_zookeeper_is_not_zookeeper(shared_dev: Dev) -> None:
    broker = shared_dev.state["brokers"][0]["url"].removeprefix("ws://")
    r = cli("pub", "--zk", broker, "chat", "x", env=shared_dev.env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    [line] = r.stderr.splitlines()
    assert line.startswith(f"Error: cannot reach ZooKeeper at {broker}: not ZooKeeper"), line


def test_ctrl_c_ends_sub_with_status_130(shared_dev: Dev) -> None:
    """It exited 0, as if it had ended on its own (--count)."""
    sub = subprocess.Popen(
        [TRITONMQ, "sub", "ctrl-c"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=shared_dev.env,
    )
    assert sub.stderr is not None
    read_until(sub.stderr, "waiting", 30)
    sub.send_signal(signal.SIGINT)
    assert sub.wait(timeout=30) == 130
    assert "Traceback" not in sub.stderr.read()


def test_interactive_pub_publishes_each_line_as_it_is_typed(shared_dev: Dev) -> None:
    """`tritonmq pub TOPIC` read all of stdin before it sent anything: nothing was
    acknowledged while one typed, and Ctrl-C lost every line typed."""
    pub = subprocess.Popen(
        [TRITONMQ, "pub", "typed"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=shared_dev.env,
    )
    try:
        assert pub.stdin is not None and pub.stdout is not None
        acks = []
        for line in ("one", "two"):
            pub.stdin.write(line + "\n")
            pub.stdin.flush()
            acks += read_until(pub.stdout, "ts=", 30)  # acknowledged before the next line
        pub.send_signal(signal.SIGINT)  # stdin still open: the user stops typing with Ctrl-C
        assert pub.wait(timeout=30) == 130
    finally:
        if pub.poll() is None:
            pub.kill()
            pub.wait()
    ts = [int(a.split("ts=")[1].split()[0]) for a in acks]
    got = cli("sub", "typed", "--from", "earliest", "--count", "2", env=shared_dev.env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines() == [f"{ts[0]}\tone", f"{ts[1]}\ttwo"]


def test_sub_json_has_key_headers_and_binary_values(shared_dev: Dev) -> None:
    """--json printed only topic, ts and the value decoded with replacement characters."""
    import asyncio

    from tritonmq import Client

    async def publish() -> list[int]:
        async with Client(shared_dev.state["brokers"][0]["url"]) as c:
            text = await c.publish("as-json", "héllo".encode(), key=b"k1", headers={"h": "v"})
            raw = await c.publish("as-json", b"\xff\x00\x01", key=b"\x80", headers={"b": b"\xfe"})
            none = await c.publish("as-json", b"")
            return [text.ts, raw.ts, none.ts]

    ts = asyncio.run(publish())
    r = cli("sub", "as-json", "--from", "earliest", "--count", "3", "--json", env=shared_dev.env)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert rows == [
        {"topic": "as-json", "ts": ts[0], "key": "k1", "value": "héllo", "headers": {"h": "v"}},
        {
            "topic": "as-json",
            "ts": ts[1],
            "key": {"base64": "gA=="},
            "value": {"base64": "/wAB"},
            "headers": {"b": {"base64": "/g=="}},
        },
        {"topic": "as-json", "ts": ts[2], "key": None, "value": "", "headers": {}},
    ]


def test_a_multi_line_value_is_one_record_in_subs_plain_output(shared_dev: Dev) -> None:
    """A value's second line looked like a record of its own (or garbage) after ts TAB."""
    published = cli("pub", "lines", "first\nsecond\n\tthird", env=shared_dev.env)
    assert published.returncode == 0, published.stderr
    ts = published.stdout.split("ts=")[1].split()[0]
    r = cli("sub", "lines", "--from", "earliest", "--count", "1", env=shared_dev.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{ts}\tfirst\n\tsecond\n\t\tthird\n"  # continuation lines: a TAB first


@pytest.mark.parametrize(
    "args", [["sub", "chat.*"], ["sub", "chat.>"], ["pub", "chat.*", "x"], ["topics", "a/b"]]
)
def test_a_topic_pattern_or_bad_name_is_refused_with_status_2(
    args: list[str], shared_dev: Dev
) -> None:
    """`sub 'chat.*'` subscribed to a topic literally named `chat.*`, silently."""
    r = cli(*args, env=shared_dev.env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    [line] = r.stderr.splitlines()[-1:]
    assert "topic name" in line and "Traceback" not in r.stderr, r.stderr
    if "*" in args[1] or ">" in args[1]:
        assert "pattern" in line


def test_the_python_client_refuses_a_pattern_with_invalid_name(shared_dev: Dev) -> None:
    import asyncio

    from tritonmq import Client
    from tritonmq.errors import InvalidName

    async def attempt() -> None:
        async with Client(shared_dev.state["brokers"][0]["url"]) as c:
            with pytest.raises(InvalidName, match="pattern"):
                c.subscribe("chat.*")
            with pytest.raises(InvalidName, match="'>'"):
                await c.publish("chat.>", b"x")
            with pytest.raises(InvalidName):
                await c.fetch("a/b", 1, 2)

    asyncio.run(attempt())


def test_dev_reports_a_broker_that_dies_and_brings_it_back_and_status_shows_pids(
    tmp_path: Path,
) -> None:
    """A broker killed under `tritonmq dev` went unmentioned and stayed dead; `status` showed
    neither pids nor URLs."""
    dev = Dev(tmp_path)
    try:
        assert dev.proc.stderr is not None
        victim = dev.state["brokers"][1]
        os.kill(victim["pid"], signal.SIGKILL)
        said = read_until(dev.proc.stderr, "restarted", 60)
        died = [line for line in said if "exited" in line]
        assert died and f"{victim['group']}/{victim['id']}" in died[0], said
        assert f"pid {victim['pid']}" in died[0] and "SIGKILL" in died[0], said

        def back() -> dict[str, object] | None:
            out = cli("status", "--json", env=dev.env)
            assert out.returncode == 0, out.stderr
            g1 = json.loads(out.stdout)["groups"]["g1"]
            return g1 if victim["id"] in g1["members"] else None

        g1 = wait_for(back, 60, "the restarted broker to register again")
        pid = g1["pids"][victim["id"]]  # type: ignore[index]
        assert pid != victim["pid"] and process_alive(pid)
        assert g1["urls"][victim["id"]].startswith("ws://127.0.0.1:")  # type: ignore[index]
        table = cli("status", env={**dev.env, "COLUMNS": "200"})  # a terminal that wide
        assert table.returncode == 0 and f"pid {pid}" in table.stdout, table.stdout
    finally:
        dev.stop()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
