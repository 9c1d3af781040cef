"""Presence on real brokers: joins and leaves between real clients, and a SIGKILLed primary
whose successor lists the members again once their clients have subscribed again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import websockets

from tests.integration.conftest import group_info, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.client import PresenceMember
from tritonmq.devtools.cluster import DevCluster
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL

pytestmark = pytest.mark.integration

T = TypeVar("T")


async def until(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout: float, what: str
) -> T:
    """``probe()`` again until ``ok`` holds for its result, or fail naming ``what``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await probe()
        if ok(got):
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {got!r}")
        await asyncio.sleep(0.05)


class Watcher:
    """What one subscription's presence callbacks saw, as ("join"|"leave", info)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def join(self, m: PresenceMember) -> None:
        self.seen.append(("join", m.info))

    def leave(self, m: PresenceMember) -> None:
        self.seen.append(("leave", m.info))

    async def saw(self, event: tuple[str, str], timeout: float = 30.0) -> None:
        async def now() -> list[tuple[str, str]]:
            return list(self.seen)

        await until(now, lambda seen: event in seen, timeout, f"{event} in {self.seen}")


def infos(members: list[PresenceMember]) -> list[str]:
    return sorted(m.info for m in members)


async def test_members_see_each_other_come_and_go_and_a_new_primary_lists_them_again(
    cluster: DevCluster,
) -> None:
    alice_w, bob_w = Watcher(), Watcher()
    url = zk_url(cluster)
    async with Client(url, timeout=60) as alice, Client(url, timeout=60) as bob:
        a = alice.subscribe(
            "room", presence=True, info="Alice", on_join=alice_w.join, on_leave=alice_w.leave
        )
        b = bob.subscribe(
            "room", presence=True, info="Bob", on_join=bob_w.join, on_leave=bob_w.leave
        )
        async with a, b:
            await alice_w.saw(("join", "Bob"))  # bob subscribed after alice
            before = await bob.presence("room")
            assert infos(before) == ["Alice", "Bob"]

            async with Client(url, timeout=60) as carol:
                async with carol.subscribe("room", presence=True, info="Carol"):
                    await alice_w.saw(("join", "Carol"))
                    await bob_w.saw(("join", "Carol"))
            # carol's client closed: its connection's member left, both are told
            await alice_w.saw(("leave", "Carol"))
            await bob_w.saw(("leave", "Carol"))
            assert infos(await alice.presence("room")) == ["Alice", "Bob"]

            old = await asyncio.to_thread(cluster.primary)
            assert old is not None
            cluster.kill(old)
            await asyncio.to_thread(wait_new_primary, cluster, old)
            # Presence is not replicated: the new primary lists whoever subscribed again,
            # which both clients do on their own once they reconnect.
            after = await until(
                lambda: alice.presence("room"),
                lambda got: infos(got) == ["Alice", "Bob"],
                60,
                "both members at the new primary",
            )
            assert not {m.client for m in after} & {m.client for m in before}
            assert infos(await bob.presence("room")) == ["Alice", "Bob"]


async def _binary(ws: websockets.ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    await ws.send(codec.packb(frame))
    return codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))


async def _text(ws: websockets.ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    await ws.send(json.dumps(frame))
    reply = await asyncio.wait_for(ws.recv(), 10)
    assert isinstance(reply, str)
    decoded: dict[str, Any] = json.loads(reply)
    return decoded


async def test_bad_or_excessive_presence_gets_typed_errors_and_members_keep_being_served(
    make_cluster: Callable[..., DevCluster],
) -> None:
    cluster = make_cluster(
        replicas=1, settings={"max_presence_members": 2, "max_presence_info_bytes": 8}
    )
    url = (await asyncio.to_thread(group_info, cluster))["primary_url"]
    watcher = Watcher()
    async with Client(zk_url(cluster), timeout=30) as good:
        async with good.subscribe("room", presence=True, info="ok", on_join=watcher.join):
            async with (
                websockets.connect(url, subprotocols=[SUBPROTOCOL]) as raw,  # type: ignore[list-item]
                websockets.connect(url, subprotocols=[JSON_SUBPROTOCOL]) as text,  # type: ignore[list-item]
            ):
                sub = {"op": "sub", "sid": 1, "topic": "room"}
                for frame, code in [
                    ({**sub, "presence": 1}, "BAD_FRAME"),
                    ({**sub, "info": "no presence"}, "BAD_FRAME"),
                    ({**sub, "presence": True, "info": "123456789"}, "LIMIT"),  # 9 bytes > 8
                    ({"op": "presence", "id": 2}, "BAD_FRAME"),
                ]:
                    got = await _binary(raw, frame)
                    assert (got["op"], got["code"]) == ("error", code), got
                    assert got.get("sid", got.get("id")) in (1, 2)
                got = await _text(text, {**sub, "presence": "yes"})
                assert (got["op"], got["code"], got["sid"]) == ("error", "BAD_FRAME", 1)
                assert (await _binary(raw, {**sub, "presence": True, "info": "raw"}))[
                    "op"
                ] == "subok"
                await watcher.saw(("join", "raw"))
                got = await _text(text, {**sub, "sid": 5, "presence": True, "info": "third"})
                assert (got["code"], got["sid"]) == ("LIMIT", 5)
                assert "max_presence_members=2" in got["message"]
                got = await _text(text, {"op": "presence", "id": 6, "topic": "room"})
                assert got["op"] == "members" and got["id"] == 6
                assert sorted(m["info"] for m in got["members"]) == ["ok", "raw"]
            # the raw member's connection closed: it left, and the good client is still served
            await until(
                lambda: good.presence("room"),
                lambda got: infos(got) == ["ok"],
                30,
                "the closed raw member to leave",
            )
