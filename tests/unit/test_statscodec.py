"""The ``stats`` op on the wire (wire/statscodec.py): both directions round-trip in both
subprotocols (the golden vectors too), and a malformed one is a typed error."""

from __future__ import annotations

import msgpack
import pytest

from tritonmq.errors import MalformedFrame
from tritonmq.wire.frames import Stats, StatsReply, SubStats, TopicStats
from tritonmq.wire.subprotocols import JSON, MSGPACK

REPLY = StatsReply(
    7,
    "g1",
    "b2",
    "backup",
    4,
    99,
    3,
    1234,
    1 << 30,
    0.5,
    1_763_856_000_000,
    (TopicStats("t", 3, 99, 97, 99, None, 0.5, 0),),
    (SubStats("t", "s", "shared", 96, None, 3, None, 2),),
    more_topics=1,
)


@pytest.mark.parametrize("codec", [MSGPACK, JSON], ids=["msgpack", "json"])
def test_request_and_reply_round_trip(codec: object) -> None:
    for frame in (Stats(1), Stats(2, "orders")):
        assert codec.decode_client(codec.encode(frame)) == frame  # type: ignore[attr-defined]
    assert codec.decode_broker(codec.encode(REPLY)) == REPLY  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "obj",
    [
        {"op": "stats"},
        {"op": "stats", "id": -1},
        {"op": "stats", "id": 1, "topic": ""},
        {"op": "stats", "id": 1, "topic": 5},
    ],
)
def test_a_bad_request_is_a_bad_frame(obj: dict[str, object]) -> None:
    with pytest.raises(MalformedFrame):
        MSGPACK.decode_client(msgpack.packb(obj))


@pytest.mark.parametrize(
    "change",
    [
        {"role": "leader"},
        {"topics": [{"topic": "t", "records": 1.5}]},
        {"topics": [1]},
        {"subscriptions": [{"topic": "t", "subscription": "s", "mode": "x", "offset": 1}]},
        {"rate": -1.0},
        {"rate": "fast"},
    ],
)
def test_a_bad_reply_is_a_bad_frame(change: dict[str, object]) -> None:
    obj = {"op": "stats", "id": 1, "role": "primary", **change}
    with pytest.raises(MalformedFrame):
        MSGPACK.decode_broker(msgpack.packb(obj))
