"""Golden vectors: every op of ``tritonmq.v1``, both ways, in both encodings.

``clients/vectors/frames.json`` is written from :func:`vectors` (``python -m
tritonmq.devtools.vectors > clients/vectors/frames.json``); the Python codec tests
and the JavaScript client's tests both read that file, so the two implementations
agree on the wire byte for byte (msgpack) and value for value (JSON).

Each vector: ``name``; ``direction`` (``client`` frames go to a broker, ``broker``
frames come from one); ``json`` (the text ``tritonmq.v1.json`` carries); ``msgpack``
(hex of the ``tritonmq.v1`` frame); ``decoded`` (the frame's fields with every
binary value as ``{"hex": ...}``, so a test compares bytes without either encoding).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tritonmq.wire.frames import (
    Ack,
    BrokerFrame,
    ClientFrame,
    Commit,
    Committed,
    Deliver,
    Error,
    ErrorCode,
    Fetch,
    Fetched,
    From,
    Hello,
    Join,
    Leave,
    Members,
    Meta,
    MetaReply,
    Nack,
    Presence,
    PresenceMember,
    Pub,
    PubAck,
    SlotInfo,
    SlotMove,
    Stats,
    StatsReply,
    Sub,
    SubDelete,
    SubInfo,
    SubOk,
    SubReset,
    SubStats,
    TopicStats,
    Unsub,
)
from tritonmq.wire.jsoncodec import map_of
from tritonmq.wire.subprotocols import JSON, MSGPACK

UUID = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")  # not valid UTF-8: base64 in JSON
TEXT_UUID = b"order-0001"  # a uuid that is text travels as text

CLIENT: list[tuple[str, ClientFrame]] = [
    ("hello", Hello("chat-page")),
    ("hello with token", Hello("chat-page", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln")),
    ("pub text value", Pub(1, "chat.lobby", [(UUID, None, b"hello, world", None)])),
    (
        "pub binary value, text key, headers",
        Pub(
            2,
            "sensors",
            [
                (UUID, b"device-7", b"\x00\xff\x10", {"ct": "bin", "raw": b"\xfe\x01", "n": 3}),
                (TEXT_UUID, b"", "café ☕".encode(), {"ratio": 0.5, "final": True}),
            ],
        ),
    ),
    ("pub max safe integer id", Pub(2**53 - 1, "t", [(UUID, None, b"", None)])),
    ("ack one", Ack(3, 42)),
    ("ack many", Ack(3, 42, (43, 45))),
    ("nack", Nack(3, 44)),
    ("sub latest", Sub(4, "chat.lobby", None, From.LATEST)),
    ("sub earliest durable", Sub(5, "chat.lobby", "alice", From.EARLIEST, window=100)),
    ("sub resume from ts", Sub(6, "chat.lobby", "alice", 1234, resume=True)),
    (
        "sub shared",
        Sub(7, "jobs", "workers", From.EARLIEST, None, "shared", True, (10, 11), (12,), "m-1"),
    ),
    ("unsub", Unsub(5)),
    ("meta", Meta(8)),
    ("fetch", Fetch(9, "chat.lobby", 100, 200, 50)),
    ("fetch skip purged", Fetch(10, "chat.lobby", 0, 2**53 - 1, 10_000, True)),
    ("commit", Commit(11, "chat.lobby", "alice", 150)),
    ("commit of a named group's ts", Commit(19, "chat.lobby", "spark-9f3c", 150, "g2")),
    ("subdel", SubDelete(12, "chat.lobby", "alice", True)),
    ("subreset to ts", SubReset(13, "chat.lobby", "alice", 99, False)),
    ("subreset to earliest", SubReset(14, "chat.lobby", "alice", From.EARLIEST, True)),
    ("sub with presence", Sub(15, "chat.lobby", None, From.LATEST, presence=True, info="Alice ☕")),
    ("presence", Presence(16, "chat.lobby")),
    ("stats", Stats(17)),
    ("stats of one topic", Stats(18, "chat.lobby")),
    ("slotmove", SlotMove(19, 7, "g1")),
]

ALICE = PresenceMember("b1.1", "alice", "Alice ☕")
BOB = PresenceMember("b1.2", "", "")

BROKER: list[tuple[str, BrokerFrame]] = [
    ("puback", PubAck(1, (1000,), "g0")),
    ("puback batch", PubAck(2, (1001, 1002), "g0")),
    (
        "deliver text and binary",
        Deliver(
            4,
            "chat.lobby",
            (
                (1000, UUID, None, b"hello, world", None),
                (1001, TEXT_UUID, b"k", b"\xc3\x28", {"raw": b"\x00", "ct": "text/plain"}),
            ),
        ),
    ),
    ("subok", SubOk(4, 1002)),
    (
        "fetched",
        Fetched(9, ((100, UUID, None, b"hi", None),), 101, ((100, 1_763_856_000_000),), 50),
    ),
    ("fetched empty", Fetched(10, (), 0)),
    ("committed", Committed(11, 150, 1002)),
    (
        "meta reply",
        MetaReply(
            8,
            "g0",
            "b1",
            "primary",
            3,
            "b1",
            "ws://127.0.0.1:7001",
            ("b1", "b2"),
            {"b1": "ws://127.0.0.1:7001", "b2": "ws://127.0.0.1:7002"},
            2048,
            12,
            commit=1001,
            topics=("chat.lobby",),
        ),
    ),
    (
        "error not primary",
        Error.of(ErrorCode.NOT_PRIMARY, "not the primary", id=1, primary="ws://h:7002", group="g0"),
    ),
    ("error bad frame on a sub", Error.of(ErrorCode.BAD_FRAME, "'topic' must be ...", sid=4)),
    ("error purged range", Error.of(ErrorCode.PURGED, "purged", sid=4, first=5, last=99)),
    (
        "subinfo",
        SubInfo(12, "chat.lobby", "alice", "broadcast", "alice", 150, 0, "reset", 99, True),
    ),
    ("slotinfo", SlotInfo(19, 7, "g0", 0, "moving", "g1")),
    ("members", Members(16, "chat.lobby", (ALICE, BOB))),
    ("members empty", Members(17, "chat.quiet", ())),
    ("join", Join(15, "chat.lobby", BOB)),
    ("leave", Leave(15, "chat.lobby", BOB)),
    (
        "stats reply",
        StatsReply(
            17,
            "g0",
            "b1",
            "primary",
            3,
            1002,
            2,
            812,
            1 << 30,
            12.5,
            1_763_856_000_500,
            (
                TopicStats("chat.lobby", 2, 90, 1001, 1002, 1_763_856_000_000, 12.5, 1),
                TopicStats("idle", 0, 0, 0, 0, None, 0.0, 0),
            ),
            (
                SubStats("chat.lobby", "alice", "broadcast", 1000, 1000, 2, 500, 1),
                SubStats("chat.lobby", "workers", "shared", 1002, None, 0, 0, 0),
            ),
        ),
    ),
]


def decoded(v: Any) -> Any:
    """A frame's map with bytes as ``{"hex": ...}`` (the encoding-neutral meaning)."""
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    if isinstance(v, dict):
        return {k: decoded(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [decoded(x) for x in v]
    return v


def vectors() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    both: list[tuple[str, str, ClientFrame | BrokerFrame]] = [
        *(("client", n, f) for n, f in CLIENT),
        *(("broker", n, f) for n, f in BROKER),
    ]
    for direction, name, frame in both:
        packed = MSGPACK.encode(frame)
        out.append(
            {
                "name": name,
                "direction": direction,
                "json": JSON.encode(frame),
                "msgpack": packed.hex(),
                "decoded": decoded(map_of(packed)),
            }
        )
    return out


def render() -> str:
    """The file's text: one vector per line block, stable for review diffs."""
    return json.dumps(vectors(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
