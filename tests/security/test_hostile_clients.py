"""Issue 26, no anonymous connection can take a broker down: each attack class runs against a
real broker beside a well-behaved monitor client, whose publishes must keep being
acknowledged during and after it. The attackers are bounded in count (a few hundred) and
time; each test asserts what a user would look at: acknowledgements, the broker's memory
and descriptors, and that the attacker was closed with a documented code."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from tests.security.hostile import (
    MIB,
    TEXT,
    RawWs,
    Refused,
    close_all,
    metric,
    monitoring,
    open_fds,
    status_bytes,
    until,
)
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster
from tritonmq.tokens import mint
from tritonmq.wire import codec, repl
from tritonmq.wire.frames import REPL_SUBPROTOCOL, SUBPROTOCOL
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL

pytestmark = pytest.mark.integration

KEY = b"hostile-clients-test-hs256-key-of-64-bytes-0123456789abcdef012345"
CLOSE_NO_HELLO = 4001
CLOSE_INBOUND_FULL = 4013
CLOSE_TOO_BIG = 1009


def _one_broker(make_cluster: Callable[..., DevCluster], **settings: Any) -> DevCluster:
    one = {"replicas": 1, "min_insync": 1}
    return make_cluster(replicas=1, settings={**one, **settings})


def _zk_url(c: DevCluster) -> str:
    return f"zk://{c.zk_hosts}{c.chroot}"


async def _primary(c: DevCluster) -> tuple[str, str, int]:
    """The primary's client URL, replication URL and pid."""
    bid = await asyncio.to_thread(c.primary)
    assert bid is not None
    member = await asyncio.to_thread(c.member, bid)
    assert member is not None
    return member["url"], member["repl_url"], c.brokers[bid].pid


async def _hello(url: str) -> RawWs:
    """An attacker that authenticates as the anonymous principal first (any broker without
    ``auth_required`` lets it): its limits are an authenticated client's."""
    ws = await RawWs.open(url, SUBPROTOCOL)
    ws.send(codec.packb({"op": "hello", "client": "attacker"}))
    reply = codec.decode_broker(await ws.recv())
    assert reply["op"] == "meta", reply
    return ws


async def test_unfinished_fragmented_messages_hold_bounded_memory(
    make_cluster: Callable[..., DevCluster],
) -> None:
    # Anonymous mode: anyone may say hello, so the per-broker budget is what bounds them.
    budget = 64 * MIB
    c = _one_broker(make_cluster, max_inbound_bytes=budget)
    url, _, pid = await _primary(c)
    async with monitoring(_zk_url(c)) as monitor:
        before = status_bytes(pid, "VmRSS")
        # 40 that never say hello: a 1 MiB first fragment; 200 that do: a 4 MiB one.
        # Each answers pings and never sends the rest. Unbounded: ~840 MiB held.
        early = [await RawWs.open(url, SUBPROTOCOL) for _ in range(40)]
        piece = b"\xab" * MIB
        for ws in early:
            ws.send(piece, fin=False)
        attackers: list[RawWs] = []
        big = b"\xcd" * (4 * MIB)
        try:
            for _ in range(10):  # 20 at a time, each pushed to the kernel before the next
                batch = [await _hello(url) for _ in range(20)]
                for ws in batch:
                    ws.send(big, fin=False)
                await asyncio.gather(*(ws.drained() for ws in batch))
                attackers += batch
            await monitor.more_acks(20)  # served during the attack: the broker read it all
            grown = status_bytes(pid, "VmHWM") - before
            assert grown < 200 * MIB, f"the broker grew by {grown / MIB:.0f} MiB"

            # The attackers were closed with documented codes: before hello, a message over
            # max_hello_bytes (1009); after, the largest holders past the budget (4013).
            await until(lambda: all(ws.closed.is_set() for ws in early), 20, "early closed")
            assert {ws.close_code for ws in early} == {CLOSE_TOO_BIG}
            holding = budget // len(big)
            await until(
                lambda: sum(ws.closed.is_set() for ws in attackers) >= len(attackers) - holding,
                20,
                "the attackers past the budget to be closed",
            )
            codes = {ws.close_code for ws in attackers if ws.closed.is_set()}
            assert codes == {CLOSE_INBOUND_FULL}, codes
            assert metric(url, "tritonmq_connections_closed_total") >= len(attackers) - holding
            await monitor.more_acks(10)  # and after it
        finally:
            await close_all(early + attackers)
        await monitor.more_acks(5)


async def test_sockets_that_never_say_hello_cannot_lock_token_holders_out(
    make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    key_file = tmp_path / "auth.key"
    key_file.write_bytes(KEY)
    token = mint(KEY, "alice", pub=["*"], read=["*"], names=["*"])
    c = _one_broker(
        make_cluster,
        auth_required=True,
        auth_key_file=str(key_file),
        max_connections=200,
        max_unauthenticated=100,
        hello_timeout=3.0,
    )
    url, _, pid = await _primary(c)
    async with monitoring(_zk_url(c), token) as monitor:
        fds = open_fds(pid)
        # 250 sockets that finish the handshake and say nothing (answering pings), and 20
        # that never even send the handshake: more than max_connections together.
        idle: list[RawWs] = []
        refused: list[int] = []
        try:
            for i in range(270):
                try:
                    idle.append(await RawWs.open(url, SUBPROTOCOL, handshake=i >= 20))
                except Refused as e:
                    refused.append(e.status)
            # A token holder that arrives now gets in, and is served.
            async with Client(_zk_url(c), token=token, timeout=20) as newcomer:
                assert (await newcomer.publish("monitor", b"newcomer")).ts > 0
            await monitor.more_acks(10)
            assert refused == [], (
                "unauthenticated sockets were refused instead of the oldest closed"
            )

            # Every idle socket was closed: the oldest to make room (past max_unauthenticated),
            # the others at hello_timeout, with 4001; bare TCP ones without a frame.
            await until(lambda: all(ws.closed.is_set() for ws in idle), 30, "idle sockets closed")
            assert {ws.close_code for ws in idle[20:]} == {CLOSE_NO_HELLO}
            await until(lambda: open_fds(pid) <= fds + 10, 20, "the broker's descriptors back")
            assert metric(url, "tritonmq_connections_closed_total") >= 250
            await monitor.more_acks(10)
        finally:
            await close_all(idle)


async def test_replication_links_that_do_not_follow_are_closed_counted_and_logged(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(settings={"repl_auth_timeout": 3.0, "max_repl_pending": 32})
    url, repl_url, pid = await _primary(c)
    primary = await asyncio.to_thread(c.primary)
    assert primary is not None
    async with monitoring(_zk_url(c)) as monitor:
        fds = open_fds(pid)
        links: list[RawWs] = []
        try:
            # 200 links answer the challenge with a `rack` (a follower's ack, no follow);
            # 50 say nothing at all. Each answers pings.
            for i in range(250):
                ws = await RawWs.open(repl_url, REPL_SUBPROTOCOL)
                if i < 200:
                    challenge = codec.decode_broker(await ws.recv())
                    assert challenge["op"] == "challenge"
                    ws.send(repl.enc_rack(1, 2**40))
                links.append(ws)
            await monitor.more_acks(10)
            await until(lambda: all(ws.closed.is_set() for ws in links), 30, "links closed")
            await until(lambda: open_fds(pid) <= fds + 10, 20, "the broker's descriptors back")
            assert metric(url, "tritonmq_repl_links_closed_total") >= 250
            log = await asyncio.to_thread(c.log_tail, primary, 400)
            lines = [ln for ln in log.splitlines() if "replication link" in ln and "closed" in ln]
            assert 1 <= len(lines) <= 10, lines  # logged, rate-limited
            # The group's own backups kept following: still a full ISR, still acknowledged.
            await asyncio.to_thread(c.wait_healthy, 20)
            await monitor.more_acks(10)
        finally:
            await close_all(links)


# --- issue 26: group-wide bounds one client could spend ------------------------------------


async def _authed(url: str, token: str | None = None) -> RawWs:
    ws = await RawWs.open(url, SUBPROTOCOL)
    hello: dict[str, Any] = {"op": "hello", "client": "attacker"}
    if token is not None:
        hello["token"] = token
    ws.send(codec.packb(hello))
    reply = codec.decode_broker(await ws.recv())
    assert reply["op"] == "meta", reply
    return ws


async def _answer(ws: RawWs, op: str | tuple[str, ...] = ("puback", "error")) -> dict[str, Any]:
    """The next frame of ``ws`` that is one of ``op`` (pushes in between are skipped)."""
    ops = (op,) if isinstance(op, str) else op
    while True:
        got = codec.decode_broker(await ws.recv(30))
        if got["op"] in ops:
            return got


async def test_one_principal_cannot_fill_the_dedup_table_for_everyone(
    make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    # Before: fresh uuids to a topic nobody reads filled dedup_max, and the whole group
    # answered FULL for dedup_window_s (53 of 62 s without a puback elsewhere).
    key_file = tmp_path / "auth.key"
    key_file.write_bytes(KEY)
    mallory = mint(KEY, "mallory", pub=["void"], read=[], names=[])
    monitor_token = mint(KEY, "monitor", pub=["*"], read=["*"], names=["*"])
    c = _one_broker(
        make_cluster,
        auth_required=True,
        auth_key_file=str(key_file),
        dedup_max=20_000,
        dedup_max_per_producer=8_000,
    )
    url, _, _ = await _primary(c)
    async with monitoring(_zk_url(c), monitor_token) as monitor:
        # two connections of one principal, 1,000 empty records a frame, 14,000 each
        attackers = [await _authed(url, mallory) for _ in range(2)]
        acked, refused = 0, []
        try:
            for i in range(14):
                for ws in attackers:
                    recs = [[os.urandom(16), None, b"", None] for _ in range(1000)]
                    ws.send(codec.packb({"op": "pub", "id": i, "topic": "void", "records": recs}))
                    got = await _answer(ws)
                    if got["op"] == "puback":
                        acked += len(got["ts"])
                    else:
                        refused.append(got)
                await monitor.more_acks(2)  # served all along
            assert acked <= 8_000, f"{acked} records of one principal acknowledged"
            assert refused and {r["code"] for r in refused} == {"FULL"}, refused[:1]
            assert "dedup_max_per_producer" in refused[0]["message"]
            await monitor.more_acks(20)  # the group is not full for anyone else
        finally:
            await close_all(attackers)


async def test_presence_churn_on_one_connection_cannot_saturate_a_primary(
    make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    # Before: re-sending `sub` with presence on one sid (a leave and a join to every member
    # each time) kept a primary from acknowledging for 65 of 66 s, with a read-only token.
    key_file = tmp_path / "auth.key"
    key_file.write_bytes(KEY)
    reader = mint(KEY, "mallory", read=["room"])
    member = mint(KEY, "member", read=["room"])
    monitor_token = mint(KEY, "monitor", pub=["*"], read=["*"], names=["*"])
    c = _one_broker(
        make_cluster,
        auth_required=True,
        auth_key_file=str(key_file),
        max_presence_members=100,
        presence_pushes_per_s=200.0,
        presence_burst=400,
    )
    url, _, _ = await _primary(c)
    async with monitoring(_zk_url(c), monitor_token) as monitor:
        members = [await _authed(url, member) for _ in range(20)]
        attacker = await _authed(url, reader)
        try:
            for ws in members:
                ws.send(codec.packb({"op": "sub", "sid": 1, "topic": "room", "presence": True}))
                await _answer(ws, "subok")
            sub = {"op": "sub", "sid": 1, "topic": "room", "presence": True, "info": "same"}
            churn = 1500
            for i in range(churn):
                if i >= 300:  # the first 300 the same member each time, then a new info each
                    sub["info"] = f"x{i}"
                attacker.send(codec.packb(sub))
                if i % 100 == 99:
                    await attacker.drained()
            answers = [await _answer(attacker, ("subok", "error")) for _ in range(churn)]
            limited = [a for a in answers if a["op"] == "error"]
            assert limited and {a["code"] for a in limited} == {"LIMIT"}, limited[:1]
            assert "presence_pushes_per_s" in limited[0]["message"]
            await monitor.more_acks(20)
            # a member was told of a bounded part of it (unbounded: 2 pushes per churned sub)
            pushes = 0
            while not members[0].messages.empty():
                op = codec.decode_broker(members[0].messages.get_nowait())["op"]
                pushes += op in ("join", "leave")
            assert pushes < churn // 2, pushes
        finally:
            await close_all([*members, attacker])


async def test_a_rebound_name_does_not_pass_the_same_origin_check(
    make_cluster: Callable[..., DevCluster],
) -> None:
    # Before: a page of http://evil.example:PORT whose name resolved to the broker (DNS
    # rebinding) sent Origin and Host of that name, equal, and was let in.
    c = _one_broker(make_cluster)
    url, _, _ = await _primary(c)
    port = url.rsplit(":", 1)[1]
    async with monitoring(_zk_url(c)) as monitor:
        with pytest.raises(Refused) as refused:
            await RawWs.open(
                url,
                SUBPROTOCOL,
                host_header=f"evil.example:{port}",
                origin=f"http://evil.example:{port}",
            )
        assert refused.value.status == 403
        # the broker's own names still pass: a page it served itself
        for name in ("localhost", "127.0.0.1"):
            ws = await RawWs.open(
                url, SUBPROTOCOL, host_header=f"{name}:{port}", origin=f"http://{name}:{port}"
            )
            await ws.aclose()
        await monitor.more_acks(5)


# --- issue 26: what all connections hold on their way out ----------------------------------


async def _never_reads(url: str) -> websockets.ClientConnection:
    """A connection that says hello and then reads nothing: its library stops reading the
    socket after one queued message, as a stalled client would."""
    ws = await websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None, max_queue=1)  # type: ignore[list-item]
    await ws.send(codec.packb({"op": "hello", "client": "attacker"}))
    assert codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))["op"] == "meta"
    return ws


async def _close_code(ws: websockets.ClientConnection) -> int | None:
    """How the broker closed ``ws`` (it finds the close frame behind what was queued, or the
    connection was aborted: None)."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), 20)
    except ConnectionClosed as e:
        return e.rcvd.code if e.rcvd is not None else None
    except TimeoutError:
        return -1  # still open


async def test_fetches_never_read_on_many_connections_hold_bounded_memory(
    make_cluster: Callable[..., DevCluster],
) -> None:
    # Before: the outbound cap was per connection only: 50 connections that sent fetches and
    # never read grew a primary by 802 MB, each within its 16 MiB. Now all client connections'
    # unsent bytes are bounded together (max_outbound_total_bytes); past it the connection
    # holding the most is closed with 4008, as at the per-connection cap.
    budget = 48 * MIB
    c = _one_broker(make_cluster, retention_s=300.0, max_outbound_total_bytes=budget)
    url, _, pid = await _primary(c)
    async with monitoring(_zk_url(c)) as monitor:
        async with Client(_zk_url(c)) as producer:  # ~4 MiB of small records to fetch
            for i in range(4):
                await producer.publish_many("big", [bytes([i, j % 256]) * 512 for j in range(1024)])
        before = status_bytes(pid, "VmRSS")
        attackers: list[websockets.ClientConnection] = []
        try:
            # 40 connections, each 6 fetches of ~4 MiB (80 bytes each): ~24 MiB asked per
            # connection, of which the kernel's socket buffers take some and the broker holds
            # the rest, under its own cap: about 400 MiB together, unbounded.
            fetch = {"op": "fetch", "topic": "big", "from": 1, "to": 10**9, "max": 10_000}
            for _ in range(40):
                ws = await _never_reads(url)
                for i in range(6):
                    await ws.send(codec.packb({**fetch, "id": i + 1}))
                attackers.append(ws)
                await asyncio.sleep(0.05)
            await monitor.more_acks(20)  # served during the attack
            grown = status_bytes(pid, "VmHWM") - before
            # the budget, one answer being encoded, and allocator slack (~100 MiB here)
            assert grown < 200 * MIB, f"the broker grew by {grown / MIB:.0f} MiB"
            codes = await asyncio.gather(*(_close_code(ws) for ws in attackers))
            closed = [code for code in codes if code != -1]
            # most were closed (those holding the most), with 4008, or aborted when they had
            # not read up to the close frame; counted by reason
            assert len(closed) >= len(attackers) // 2, codes
            assert set(closed) <= {4008, None}, codes
            assert metric(url, "tritonmq_connections_closed_total") >= len(closed)
            await monitor.more_acks(10)  # and after it
        finally:
            await asyncio.gather(*(ws.close() for ws in attackers), return_exceptions=True)


async def test_a_text_message_of_invalid_utf8_closes_with_a_documented_code(
    make_cluster: Callable[..., DevCluster],
) -> None:
    # The websocket layer closes a connection whose text message is not UTF-8 with 1007
    # (RFC 6455), before any codec sees it; docs/protocol.md §7 did not list 1007.
    c = _one_broker(make_cluster)
    url, _, _ = await _primary(c)
    section = Path(__file__).parents[2] / "docs" / "protocol.md"
    close_codes = section.read_text().split("WebSocket close codes:", 1)[1].split("## 8.", 1)[0]
    async with monitoring(_zk_url(c)) as monitor:
        for subprotocol in (JSON_SUBPROTOCOL, SUBPROTOCOL):
            ws = (
                await _authed(url)
                if subprotocol == SUBPROTOCOL
                else await RawWs.open(url, subprotocol)
            )
            ws.send(b'{"op": "hello", "client": "\xff\xfe"}', TEXT)
            await until(ws.closed.is_set, 10, "the connection closed")
            assert ws.close_code == 1007, ws.close_code
            assert f"**{ws.close_code}**" in close_codes, "close code not in protocol.md §7"
        await monitor.more_acks(5)
