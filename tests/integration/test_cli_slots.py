"""`tritonmq slots` as an operator runs it, on a real cluster and a real ZooKeeper."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from tests.integration.conftest import zk_url
from tritonmq import Client
from tritonmq.coord.slots import cas_slot, init_cluster, read_slot_histories, read_slot_map
from tritonmq.coord.zkclient import new_client
from tritonmq.core.slothistory import SlotHistory, begin_move, complete, seal
from tritonmq.core.slots import SlotMap, slot_of
from tritonmq.devtools.cluster import DevCluster
from tritonmq.devtools.zkserver import ZooKeeperServer
from tritonmq.errors import SlotHistoryError

pytestmark = pytest.mark.integration
TRITONMQ = [sys.executable, "-m", "tritonmq"]


def slots(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TRITONMQ, "slots", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def zk(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    client = new_client(zk_server.hostport)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def test_a_running_clusters_slots_are_all_at_era_0_with_no_move(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(groups=2, replicas=1, settings={"replicas": 1, "min_insync": 1})
    where = ["--zk", str(c.zk_hosts), "--chroot", c.chroot]
    r = slots(*where, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    expected = SlotMap.spread(["g1", "g2"], 64).owners
    assert [s["owner"] for s in out["slots"]] == list(expected)
    assert {(s["era"], s["state"], s["writer"] == s["owner"]) for s in out["slots"]} == {
        (0, "normal", True)
    }
    assert all(s["history"] == [] and s["move"] is None for s in out["slots"])
    picked = json.loads(slots(*where, "--json", "5", "0", "5").stdout)["slots"]
    assert [s["slot"] for s in picked] == [0, 5]
    table = slots(*where, "1")
    assert table.returncode == 0 and "g2" in table.stdout and "normal" in table.stdout


def test_a_slot_shows_its_topics_records_bytes_and_rate_and_none_where_unanswered(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(groups=2, replicas=1, settings={"replicas": 1, "min_insync": 1})
    where = ["--zk", str(c.zk_hosts), "--chroot", c.chroot]

    async def publish() -> None:
        async with Client(zk_url(c)) as client:
            await client.commit("orders", "billing", 0)  # retained: billing has not read them
            await client.publish_many("orders", [b"x" * 100] * 10)

    asyncio.run(publish())
    n = slot_of("orders", 64)
    r = slots(*where, "--json")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    by_slot = {s["slot"]: s for s in json.loads(r.stdout)["slots"]}
    orders = by_slot[n]
    assert (orders["topics"], orders["records"]) == (1, 10)
    assert orders["bytes"] >= 1000
    assert all(s["records"] == 0 for k, s in by_slot.items() if k != n)
    table = slots(*where, str(n))
    assert table.returncode == 0 and " 10 " in table.stdout, table.stdout

    other = "g2" if orders["owner"] == "g1" else "g1"
    [silent] = [b for b, p in c.brokers.items() if p.group == other]
    c.kill(silent, signal.SIGKILL)
    r = slots(*where, "--json", "--timeout", "2")
    assert r.returncode == 0, r.stderr
    assert f"warning: group {other}" in r.stderr and "Traceback" not in r.stderr, r.stderr
    by_slot = {s["slot"]: s for s in json.loads(r.stdout)["slots"]}
    assert by_slot[n]["records"] == 10
    assert {s["records"] for s in by_slot.values() if s["owner"] == other} == {None}

    # The rate is over the last few seconds: read while records keep arriving.
    async def rate_seen() -> float:
        async with Client(zk_url(c)) as client:
            deadline = time.monotonic() + 30
            while True:
                await client.publish("orders", b"x")
                r = await asyncio.to_thread(slots, *where, "--json", str(n))
                rate = json.loads(r.stdout)["slots"][0]["rate"]
                if rate or time.monotonic() > deadline:
                    return float(rate or 0)

    assert asyncio.run(rate_seen()) > 0


def test_a_move_is_written_only_by_cas_and_shows_in_the_map(
    zk_server: ZooKeeperServer, zk: KazooClient
) -> None:
    chroot = f"/slots-{uuid.uuid4().hex[:8]}"
    init_cluster(zk_server.hostport, chroot, ["g1", "g2"], 4)
    read = read_slot_histories(zk, chroot)
    assert read is not None and read.slots[2] == SlotHistory("g1")
    moving = begin_move(read.slots[2], "g2")
    assert cas_slot(zk, chroot, 2, moving, read)
    # a second writer that read the same versions loses, whatever it wanted to write
    assert not cas_slot(zk, chroot, 2, begin_move(read.slots[2], "g2"), read)
    assert not cas_slot(zk, chroot, 1, begin_move(read.slots[1], "g1"), read)  # /cluster moved
    for step in (lambda h: seal(h, "g1", 1200), lambda h: complete(h, "g2")):
        now = read_slot_histories(zk, chroot)
        assert now is not None
        assert cas_slot(zk, chroot, 2, step(now.slots[2]), now)
    smap = read_slot_map(zk, chroot)  # what brokers and clients route by today
    assert smap is not None and smap.owners == ("g1", "g2", "g2", "g2") and smap.version == 3
    out = json.loads(slots("--zk", zk_server.hostport, "--chroot", chroot, "--json").stdout)
    assert out["version"] == 3
    moved = out["slots"][2]
    assert (moved["owner"], moved["era"], moved["state"], moved["move"]) == (
        "g2",
        1,
        "normal",
        None,
    )
    assert moved["history"] == [{"era": 0, "group": "g1", "after": 0, "until": 1200}]
    assert [s["era"] for s in out["slots"]] == [0, 0, 1, 0]


def test_a_move_in_progress_shows_its_target_and_seal_point(
    zk_server: ZooKeeperServer, zk: KazooClient
) -> None:
    chroot = f"/slots-{uuid.uuid4().hex[:8]}"
    init_cluster(zk_server.hostport, chroot, ["g1", "g2"], 2)
    read = read_slot_histories(zk, chroot)
    assert read is not None
    assert cas_slot(zk, chroot, 0, seal(begin_move(read.slots[0], "g2"), "g1", 77), read)
    out = json.loads(slots("--zk", zk_server.hostport, "--chroot", chroot, "--json").stdout)
    s = out["slots"][0]
    assert (s["owner"], s["writer"], s["move"]) == (
        "g1",
        None,
        {"to": "g2", "state": "sealed", "until": 77},
    )
    table = slots("--zk", zk_server.hostport, "--chroot", chroot)
    assert "to g2, sealed at 77" in table.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["9"], "slots 0..3"),
        (["-1"], "SLOT"),
        (["x"], "SLOT"),
        (["--timeout", "0"], "--timeout"),
    ],
)
def test_a_bad_argument_exits_2_with_a_message(
    zk_server: ZooKeeperServer, args: list[str], says: str
) -> None:
    chroot = f"/slots-{uuid.uuid4().hex[:8]}"
    init_cluster(zk_server.hostport, chroot, ["g1"], 4)
    r = slots("--zk", zk_server.hostport, "--chroot", chroot, *args)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_an_unreadable_cluster_exits_2_with_a_message(
    zk_server: ZooKeeperServer, zk: KazooClient
) -> None:
    r = slots("--zk", "127.0.0.1:1", "--timeout", "1")
    assert r.returncode == 2 and "cannot reach ZooKeeper" in r.stderr, r.stderr
    r = slots("--zk", zk_server.hostport, "--chroot", "/nothing-here")
    assert r.returncode == 2 and "no slot map" in r.stderr, r.stderr
    chroot = f"/slots-{uuid.uuid4().hex[:8]}"
    init_cluster(zk_server.hostport, chroot, ["g1", "g2"], 2)
    zk.set(f"{chroot}/slots/1", json.dumps({"group": "g1", "state": "sealed"}).encode())
    with pytest.raises(SlotHistoryError):
        read_slot_histories(zk, chroot)
    r = slots("--zk", zk_server.hostport, "--chroot", chroot)
    assert r.returncode == 2 and "sealed" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_moves_and_roll_backs_that_cannot_be_are_refused_with_exit_2(
    zk_server: ZooKeeperServer, zk: KazooClient
) -> None:
    """No broker runs here: the map alone says what may be asked."""
    chroot = f"/slots-{uuid.uuid4().hex[:8]}"
    init_cluster(zk_server.hostport, chroot, ["g1", "g2"], 4)
    where = ["--zk", zk_server.hostport, "--chroot", chroot]
    for args, says in [
        (["move", "9", "--to", "g2"], "slots 0..3"),
        (["move", "--to", "g2"], "SLOT"),
        (["move", "0"], "--to"),
        (["move", "0", "--to", "g9"], "no group 'g9'"),
        (["move", "0", "2", "--to", "g1"], "slot 0: cannot move a slot of g1 to 'g1'"),
        (["roll-back", "0"], "slot 0: no move to roll back"),
    ]:
        r = slots(*args, *where)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r)
    read = read_slot_histories(zk, chroot)
    assert read is not None and all(h.move is None for h in read.slots), "nothing was written"

    r = slots("move", "1", "--to", "g1", "--no-wait", *where)
    assert r.returncode == 0 and "slot 1: moving" in r.stdout, r.stderr
    r = slots("move", "1", "--to", "g1", *where)
    assert r.returncode == 2 and "already moving" in r.stderr, r.stderr
    # nobody completes it here: the wait ends at its deadline with exit 1, saying so
    r = slots("move", "0", "--to", "g2", "--timeout", "0.5", "--json", *where)
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["slots"] == [{"slot": 0, "outcome": "moving", "owner": "g1"}]
    r = slots("roll-back", "0", "1", *where)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "slot 0: rolled back (owner g1)",
        "slot 1: rolled back (owner g2)",
    ]
    read = read_slot_histories(zk, chroot)
    assert read is not None and all(h.move is None and h.era == 0 for h in read.slots)


def rebalance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRITONMQ, "rebalance", *args], capture_output=True, text=True, timeout=60
    )


def test_rebalance_plans_a_dry_run_and_refuses_what_cannot_be_done(
    zk_server: ZooKeeperServer, zk: KazooClient
) -> None:
    chroot = f"/slots-{uuid.uuid4().hex[:8]}"
    init_cluster(zk_server.hostport, chroot, ["g1", "g2"], 6)
    where = ["--zk", zk_server.hostport, "--chroot", chroot]
    r = rebalance(*where)
    assert r.returncode == 0 and r.stdout.splitlines() == [
        "0 slot(s) to move (dry run: --execute runs them); then g1 3, g2 3"
    ], r
    r = rebalance("--groups", "g2", "--json", *where)  # draining g1, as a dry run
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["moves"] == [{"slot": n, "from": "g1", "to": "g2"} for n in (0, 2, 4)]
    assert (out["after"], out["executed"]) == ({"g1": 0, "g2": 6}, False)
    read = read_slot_histories(zk, chroot)
    assert read is not None and all(h.move is None for h in read.slots), "a dry run writes nothing"
    for args, says in [
        (["--groups", "g1,g9"], "no group 'g9'"),
        (["--groups", "g2", "--execute"], "group g2 has no live broker"),
    ]:
        r = rebalance(*args, *where)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r)


def test_a_move_survives_a_zookeeper_blip_while_it_waits_and_exits_0(
    make_cluster: Callable[..., DevCluster], zk_server: ZooKeeperServer, zk: KazooClient
) -> None:
    """Issue 26: ZooKeeper out of reach while `slots move` waited made it exit 1 with
    kazoo's ConnectionLoss traceback, although the move completed (1 is "did not
    complete"). It waits the blip out, says so on stderr, and reports the move."""
    import threading

    from tritonmq.devtools.netproxy import Proxy

    settings = {"replicas": 1, "min_insync": 1, "session_timeout": 20.0}
    c = make_cluster(groups=2, replicas=1, settings=settings, isolated=True)
    hs = read_slot_histories(zk, c.chroot)
    assert hs is not None
    n = next(i for i, h in enumerate(hs.slots) if h.owner == "g1")
    g2 = c.primary("g2")
    assert g2 is not None
    host, _, port = zk_server.hostport.rpartition(":")
    with Proxy(host, int(port)) as proxy:  # the operator's way to ZooKeeper
        c.cut_zk(g2)  # g2 cannot complete the move: it stays under way while we watch
        cmd = [*TRITONMQ, "slots", "move", str(n), "--to", "g2", "--timeout", "120"]
        proc = subprocess.Popen(
            [*cmd, "--zk", proxy.address, "--chroot", c.chroot],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        err_lines: list[str] = []
        warned = threading.Event()

        def read_stderr() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                err_lines.append(line)
                if "lost ZooKeeper" in line:
                    warned.set()

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 30
            while read_slot_histories(zk, c.chroot).slots[n].move is None:  # type: ignore[union-attr]
                assert proc.poll() is None, "".join(err_lines)
                assert time.monotonic() < deadline, "the move never began"
                time.sleep(0.05)
            proxy.cut()  # the blip, while it waits
            assert warned.wait(30), "".join(err_lines) or f"exit {proc.poll()}"
            c.heal_zk(g2)  # the move completes while the command cannot see it
            deadline = time.monotonic() + 60
            while read_slot_histories(zk, c.chroot).slots[n].owner != "g2":  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "the move never completed"
                time.sleep(0.05)
            proxy.heal()
            proc.wait(timeout=60)
            assert proc.stdout is not None
            out = proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            c.heal()
        reader.join(5)
    err = "".join(err_lines)
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err, err
    assert f"slot {n}: moved (owner g2)" in out
