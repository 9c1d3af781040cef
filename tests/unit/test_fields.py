"""The field checks every decoder shares: the field back, or MalformedFrame naming it; and
the rules they keep on every frame (integers within 2^53, nil means absent)."""

from __future__ import annotations

from typing import Any

import pytest

from tritonmq.errors import MalformedFrame
from tritonmq.wire import codec, subprotocols
from tritonmq.wire.fields import (
    MAX_SAFE_INT,
    bin_field,
    headers_field,
    int_field,
    opt_int,
    published_pairs,
    str_field,
)
from tritonmq.wire.frames import (
    Committed,
    Deliver,
    Error,
    ErrorCode,
    Fetch,
    Fetched,
    From,
    Hello,
    Meta,
    PubAck,
    Sub,
    SubOk,
)


def test_integers_are_within_the_range_javascript_keeps_exact() -> None:
    assert int_field({"id": MAX_SAFE_INT}, "id") == MAX_SAFE_INT
    assert int_field({"id": None}, "id", default=3) == 3, "nil is absent"
    assert opt_int({}, "ts") is None
    for bad in ({"id": MAX_SAFE_INT + 1}, {"id": -1}, {"id": True}, {"id": 1.0}, {}):
        with pytest.raises(MalformedFrame, match="'id'"):
            int_field(bad, "id")


def test_strings_binaries_headers_and_published_pairs() -> None:
    assert str_field({"t": "x"}, "t", max_len=1) == "x"
    assert str_field({}, "t", max_len=1, optional=True) == ""
    with pytest.raises(MalformedFrame, match="'t'"):
        str_field({"t": "xy"}, "t", max_len=1)
    assert bin_field({"p": b"ab"}, "p", max_len=2) == b"ab"
    with pytest.raises(MalformedFrame, match="'p'"):
        bin_field({"p": "ab"}, "p", max_len=2)
    assert headers_field({"k": b"v", "n": 1}) == {"k": b"v", "n": 1}
    with pytest.raises(MalformedFrame, match="header"):
        headers_field({"k": [1]})
    assert published_pairs({"published": ((1, 2),)}) == ((1, 2),)
    with pytest.raises(MalformedFrame, match="'published'"):
        published_pairs({"published": ((1,),)})


MAX = MAX_SAFE_INT


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        ({"op": "pub", "id": MAX + 1, "topic": "t", "records": [[b"u", None, b"v", None]]}, "id"),
        ({"op": "sub", "sid": MAX + 1, "topic": "t"}, "sid"),
        ({"op": "sub", "sid": 1, "topic": "t", "from": MAX + 1}, "from"),
        ({"op": "sub", "sid": 1, "topic": "t", "window": MAX + 1}, "window"),
        (
            {
                "op": "sub",
                "sid": 1,
                "topic": "t",
                "subscription": "s",
                "mode": "shared",
                "acked": [MAX + 1],
            },
            "acked",
        ),
        (
            {
                "op": "sub",
                "sid": 1,
                "topic": "t",
                "subscription": "s",
                "mode": "shared",
                "held": [2**64 - 1],
            },
            "held",
        ),
        ({"op": "ack", "sid": 1, "ts": MAX + 1}, "ts"),
        ({"op": "ack", "sid": 1, "ts": [1, MAX + 1]}, "ts"),
        ({"op": "nack", "sid": 1, "ts": 2**63}, "ts"),
        ({"op": "fetch", "id": 1, "topic": "t", "from": MAX + 1, "to": 2}, "from"),
        ({"op": "fetch", "id": 1, "topic": "t", "from": 1, "to": 2**64 - 1}, "to"),
        ({"op": "fetch", "id": 1, "topic": "t", "from": 1, "to": 2, "max": MAX + 1}, "max"),
        ({"op": "commit", "id": 1, "topic": "t", "subscription": "s", "ts": MAX + 1}, "ts"),
        ({"op": "meta", "id": MAX + 1}, "id"),
        (
            {"op": "pub", "id": 1, "topic": "t", "records": [[b"u", None, b"v", {"h": MAX + 1}]]},
            "headers",
        ),
        (
            {"op": "pub", "id": 1, "topic": "t", "records": [[b"u", None, b"v", {"h": -MAX - 1}]]},
            "headers",
        ),
    ],
)
def test_client_integers_above_2_53_are_bad_frames_with_the_id(
    frame: dict[str, Any], field: str
) -> None:
    with pytest.raises(MalformedFrame) as e:
        codec.decode_client(codec.packb(frame))
    request = "id" if "id" in frame else "sid"
    if frame[request] <= MAX:
        assert getattr(e.value, request) == frame[request], field
    else:
        assert getattr(e.value, request) is None  # the id itself is the bad field
    exact = {k: (MAX if v == MAX + 1 else v) for k, v in frame.items()}
    if exact != frame:  # the largest exact integer is fine
        codec.decode_client(codec.packb(exact))


@pytest.mark.parametrize(
    "frame",
    [
        PubAck(MAX + 1, (1,), "g1"),
        PubAck(1, (MAX + 1,), "g1"),
        SubOk(1, MAX + 1),
        Committed(1, MAX + 1, 2),
        Fetched(1, ((MAX + 1, b"u", None, b"v", None),), 2),
        Deliver(1, "t", ((MAX + 1, b"u", None, b"v", None),)),
        Error(ErrorCode.PURGED, "gone", False, id=1, first=1, last=MAX + 1),
    ],
)
def test_broker_integers_above_2_53_are_refused_by_the_client(frame: Any) -> None:
    with pytest.raises(MalformedFrame):
        subprotocols.MSGPACK.decode_broker(subprotocols.MSGPACK.encode(frame))


def test_nil_in_an_optional_field_means_absent_everywhere() -> None:
    nil_sub = {
        "op": "sub",
        "sid": 1,
        "topic": "t",
        "from": None,
        "window": None,
        "subscription": None,
        "mode": None,
        "resume": None,
        "acked": None,
        "held": None,
    }
    assert codec.decode_client(codec.packb(nil_sub)) == Sub(1, "t", None, From.LATEST, None)
    nil_fetch = {
        "op": "fetch",
        "id": 1,
        "topic": "t",
        "from": 1,
        "to": 9,
        "max": None,
        "skip_purged": None,
    }
    assert codec.decode_client(codec.packb(nil_fetch)) == Fetch(1, "t", 1, 9, 10_000)
    assert codec.decode_client(codec.packb({"op": "meta", "id": None})) == Meta(0)
    assert codec.decode_client(codec.packb({"op": "hello", "client": None})) == Hello("")
    # a required field that is nil is missing
    with pytest.raises(MalformedFrame) as e:
        codec.decode_client(
            codec.packb({"op": "fetch", "id": 4, "topic": "t", "from": None, "to": 9})
        )
    assert e.value.id == 4
