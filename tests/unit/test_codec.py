"""The msgpack codec: frames survive round trips; hostile input only raises ProtocolError."""

from __future__ import annotations

import tracemalloc
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonmq.errors import FrameTooLarge, MalformedFrame, ProtocolError, UnknownOp
from tritonmq.wire import codec, repl, subprotocols
from tritonmq.wire.frames import (
    Ack,
    ClientFrame,
    Commit,
    Committed,
    Deliver,
    Error,
    ErrorCode,
    Fetch,
    Fetched,
    Follow,
    From,
    Hello,
    Leader,
    Meta,
    MetaReply,
    Nack,
    Pub,
    PubAck,
    Sub,
    SubDelete,
    SubInfo,
    SubOk,
    SubReset,
    Unsub,
)

# --- strategies ---------------------------------------------------------------------

ids = st.integers(0, codec.MAX_SAFE_INT)
names = st.text(min_size=1, max_size=codec.MAX_TOPIC_LEN)
uuids = st.binary(min_size=1, max_size=codec.MAX_UUID_LEN)
keys = st.none() | st.binary(max_size=32)
values = st.binary(max_size=256)
header_values = st.one_of(
    st.text(max_size=20),
    st.binary(max_size=20),
    st.integers(-codec.MAX_SAFE_INT, codec.MAX_SAFE_INT),
    st.floats(allow_nan=False),
    st.booleans(),
)
headers = st.none() | st.dictionaries(st.text(max_size=16), header_values, max_size=8)
pub_records = st.tuples(uuids, keys, values, headers)
starts: st.SearchStrategy[From | int] = st.sampled_from(list(From)) | st.integers(
    0, codec.MAX_SAFE_INT
)

client_frames: st.SearchStrategy[ClientFrame] = st.one_of(
    st.builds(Hello, st.text(max_size=40)),
    st.builds(Pub, ids, names, st.lists(pub_records, min_size=1, max_size=16)),
    st.builds(
        Sub,
        ids,
        names,
        st.none() | st.text(min_size=1, max_size=codec.MAX_NAME_LEN),
        starts,
        st.none() | st.integers(1, 2**32),
    ),
    st.builds(Ack, ids, ids),
    st.builds(Nack, ids, ids),
    st.builds(Unsub, ids),
    st.builds(Fetch, ids, names, ids, ids, st.integers(1, codec.MAX_SAFE_INT), st.booleans()),
    st.builds(Meta, ids),
    st.builds(Commit, ids, names, st.text(min_size=1, max_size=codec.MAX_NAME_LEN), ids),
)

stamped = st.tuples(st.integers(0, codec.MAX_SAFE_INT), uuids, keys, values, headers)
entries = st.lists(st.tuples(st.text(min_size=1, max_size=20), stamped), max_size=16)
epoch_lists = st.lists(
    st.tuples(st.integers(0, codec.MAX_SAFE_INT), st.integers(0, codec.MAX_SAFE_INT)), max_size=6
)
short_names = st.text(min_size=1, max_size=codec.MAX_NAME_LEN)


# --- round trips --------------------------------------------------------------------


def _shared_sub(**fields: Any) -> bytes:
    frame = {"op": "sub", "sid": 2, "topic": "t", "subscription": "s", "mode": "shared"}
    return codec.packb({**frame, **fields})


ts_lists = st.lists(st.integers(0, codec.MAX_SAFE_INT), max_size=50)


@given(ts_lists, ts_lists, st.booleans())
def test_a_shared_sub_carries_what_its_member_acked_and_holds(
    acked: list[int], held: list[int], resume: bool
) -> None:
    frame = Sub(1, "t", "s", From.LATEST, None, "shared", resume, tuple(acked), tuple(held))
    assert codec.decode_client(codec.enc_client(frame)) == frame


@given(client_frames)
@settings(max_examples=300)
def test_every_client_frame_round_trips(frame: ClientFrame) -> None:
    assert codec.decode_client(codec.enc_client(frame)) == frame


security_frames: st.SearchStrategy[ClientFrame] = st.one_of(
    st.builds(Hello, st.text(max_size=40), st.none() | st.text(min_size=1, max_size=2000)),
    st.builds(SubDelete, ids, names, short_names, st.booleans()),
    st.builds(SubReset, ids, names, short_names, starts, st.booleans()),
)


@given(security_frames)
def test_hello_with_a_token_and_the_admin_ops_round_trip(frame: ClientFrame) -> None:
    assert codec.decode_client(codec.enc_client(frame)) == frame


@pytest.mark.parametrize(
    "fields",
    [
        {"op": "hello", "token": 5},
        {"op": "hello", "token": "x" * (codec.MAX_TOKEN_LEN + 1)},
        {"op": "subdel", "id": 1, "topic": "t"},
        {"op": "subdel", "id": 1, "topic": "t", "subscription": "s", "execute": 1},
        {"op": "subreset", "id": 1, "topic": "t", "subscription": "s"},
        {"op": "subreset", "id": 1, "topic": "t", "subscription": "s", "to": "now"},
        {"op": "subreset", "id": 1, "topic": "t", "subscription": "s", "to": -1},
    ],
)
def test_bad_tokens_and_admin_ops_are_malformed(fields: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame):
        codec.decode_client(codec.packb(fields))


def test_subinfo_round_trips() -> None:
    for info in (
        SubInfo(3, "t", "s", "shared", "alice", 7, 0, "reset", 9, True),
        SubInfo(4, "t", "s", "broadcast", "", 7, 2, "delete"),
    ):
        assert subprotocols.MSGPACK.decode_broker(subprotocols.MSGPACK.encode(info)) == info


def test_a_shared_member_id_round_trips_and_is_checked() -> None:
    frame = Sub(1, "t", "s", From.LATEST, None, "shared", True, (3,), (4,), "a1b2")
    assert codec.decode_client(codec.enc_client(frame)) == frame
    base = {"op": "sub", "sid": 1, "topic": "t", "subscription": "s"}
    for bad in (
        {**base, "mode": "shared", "member": 7},
        {**base, "mode": "shared", "member": "x" * 65},
        {**base, "member": "a1b2"},  # a broadcast subscription has no members
    ):
        with pytest.raises(MalformedFrame):
            codec.decode_client(msgpack.packb(bad))


def test_broker_frames_decode_to_their_maps() -> None:
    rec = (7, b"u1", None, b"hello", {"h": "v"})
    assert codec.decode_broker(codec.enc_puback(3, [5, 6], "g1")) == {
        "op": "puback",
        "id": 3,
        "ts": (5, 6),
        "group": "g1",
    }
    moved = codec.decode_broker(codec.enc_puback(3, [5, 6], "g2", [0, 1]))
    assert moved == {"op": "puback", "id": 3, "ts": (5, 6), "group": "g2", "eras": (0, 1)}
    deliver = codec.decode_broker(codec.enc_deliver(2, "chat", [rec]))
    assert deliver == {"op": "deliver", "sid": 2, "topic": "chat", "records": (rec,)}
    assert codec.decode_broker(codec.enc_subok(2, 8)) == {"op": "subok", "sid": 2, "next": 8}
    fetched = codec.decode_broker(codec.enc_fetched(4, [rec], 8))
    assert fetched == {"op": "fetched", "id": 4, "records": (rec,), "next": 8}


def test_error_frame_carries_code_retriable_flag_and_primary() -> None:
    frame = codec.decode_broker(
        codec.enc_error(ErrorCode.NOT_PRIMARY, "go away", id=9, primary="ws://b:1")
    )
    assert frame == {
        "op": "error",
        "code": "NOT_PRIMARY",
        "message": "go away",
        "retriable": True,
        "id": 9,
        "primary": "ws://b:1",
    }
    bare = codec.decode_broker(codec.enc_error(ErrorCode.BAD_REQUEST, "no"))
    assert bare == {"op": "error", "code": "BAD_REQUEST", "message": "no", "retriable": False}


# --- typed broker frames -------------------------------------------------------------

_records = st.lists(
    st.tuples(
        st.integers(1, codec.MAX_SAFE_INT),
        st.binary(min_size=16, max_size=16),
        st.none() | st.binary(max_size=8),
        st.binary(max_size=32),
        st.none() | st.dictionaries(st.text(max_size=4), st.integers(0, 9), max_size=2),
    ),
    max_size=20,
).map(tuple)


@given(st.integers(0, 2**31), st.text(min_size=1, max_size=20), _records)
def test_deliver_and_fetched_round_trip_typed(sid: int, topic: str, records: Any) -> None:
    for frame in (Deliver(sid, topic, records), Fetched(sid, records, sid + 1)):
        assert subprotocols.MSGPACK.decode_broker(subprotocols.MSGPACK.encode(frame)) == frame


def test_typed_broker_frames_round_trip() -> None:
    meta = MetaReply(
        0,
        "g1",
        "b2",
        "backup",
        3,
        "b1",
        "ws://h:1",
        ("b1", "b2"),
        {"b1": "ws://h:1", "b2": "ws://h:2"},
        52,
        8,
        {"g1": {"primary": "b1", "primary_url": "ws://h:1", "members": {}}},
        {"slots": 4, "owners": ("g1",) * 4, "version": 0},
    )
    frames = [
        PubAck(3, (5, 6), "g1"),
        SubOk(2, 8),
        PubAck(4, (5, 9), "g2", (0, 1)),
        meta,
        MetaReply(1, "g1", "b1", "primary"),
        Error.of(ErrorCode.NOT_PRIMARY, "go away", id=9, primary="ws://b:1"),
        Error.of(ErrorCode.WRONG_GROUP, "there", sid=2, group="g2"),
        Error.of(ErrorCode.PURGED, "gone", sid=4, first=10, last=20),
        Error.of(ErrorCode.BAD_REQUEST, "no"),
    ]
    for frame in frames:
        assert subprotocols.MSGPACK.decode_broker(subprotocols.MSGPACK.encode(frame)) == frame
    # The functions the broker calls encode the same bytes as the codec object.
    assert codec.enc_puback(3, (5, 6), "g1") == subprotocols.MSGPACK.encode(frames[0])
    assert codec.enc_meta(meta) == subprotocols.MSGPACK.encode(meta)


def test_retriable_comes_from_the_code_not_from_the_frame() -> None:
    lying = codec.packb({"op": "error", "code": "BAD_REQUEST", "message": "", "retriable": True})
    assert subprotocols.MSGPACK.decode_broker(lying) == Error(ErrorCode.BAD_REQUEST, "", False)
    hiding = codec.packb({"op": "error", "code": "FULL", "message": "m", "retriable": False})
    assert subprotocols.MSGPACK.decode_broker(hiding).retriable is True  # type: ignore[union-attr]
    newer = codec.packb({"op": "error", "code": "LATER_CODE", "message": "", "retriable": True})
    assert subprotocols.MSGPACK.decode_broker(newer) == Error("LATER_CODE", "", True)
    assert [c for c in ErrorCode if c.retriable] == [
        ErrorCode.NOT_PRIMARY,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNAVAILABLE,
        ErrorCode.WRONG_GROUP,
        ErrorCode.FULL,
    ]


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "deliver", "sid": 1, "topic": "t", "records": [[1, b"u", None, b"v"]]},
        {"op": "deliver", "sid": 1, "topic": "t", "records": [["1", b"u", None, b"v", None]]},
        {"op": "deliver", "sid": 1, "topic": "t", "records": [5]},
        {"op": "deliver", "sid": -1, "topic": "t", "records": []},
        {"op": "puback", "id": 1, "ts": [1, "2"], "group": "g"},
        {"op": "puback", "id": 1, "ts": [1, 2], "group": "g", "eras": [0]},
        {"op": "puback", "id": 1, "ts": [1], "group": "g", "eras": [-1]},
        {"op": "subok", "sid": 1},
        {"op": "fetched", "id": 1, "records": {}, "next": 1},
        {"op": "error", "code": 5, "message": "m"},
        {"op": "error", "code": "FULL", "message": "m", "id": "1"},
        {"op": "meta", "id": 0, "group": "g", "broker": "b", "role": "leader"},
        {"op": "meta", "id": 0, "group": "g", "broker": "b", "role": "primary", "isr": [1]},
        {"op": "meta", "id": 0, "group": "g", "broker": "b", "role": "primary", "members": []},
        {"op": "meta", "id": 0, "group": "g", "broker": "b", "role": "primary", "topics": [1]},
        {"op": "meta", "id": 0, "group": "g", "broker": "b", "role": "primary", "commit": -1},
        {"op": "fetched", "id": 1, "records": [], "next": 1, "published": [[1, "2"]]},
        {"op": "fetched", "id": 1, "records": [], "next": 1, "purged": "3"},
        {"op": "committed", "id": 1, "ts": 2},
        {"op": "committed", "id": 1, "ts": -2, "head": 3},
    ],
)
def test_bad_broker_frames_are_malformed(frame: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame):
        subprotocols.MSGPACK.decode_broker(codec.packb(frame))


# --- defaults -----------------------------------------------------------------------


def test_the_eras_of_a_moved_slot_round_trip_and_are_absent_at_era_0() -> None:
    """docs/protocol.md: a position's era on sub, deliver, subok, and where a reader
    goes on in a WRONG_GROUP (absent: 0 / none)."""
    m = subprotocols.MSGPACK
    sub = Sub(1, "t", None, 7, resume=True, era=2)
    assert m.decode_client(m.encode(sub)) == sub
    assert "era" not in msgpack.unpackb(m.encode(Sub(1, "t", None, 7)))
    recs = ((5, b"u", None, b"v", None),)
    for frame in (
        Deliver(1, "t", recs, 3),
        SubOk(1, 6, 3),
        Error.of(ErrorCode.WRONG_GROUP, "on", sid=1, group="g2", era=1, after=40),
    ):
        assert m.decode_broker(m.encode(frame)) == frame
        assert subprotocols.JSON.decode_broker(subprotocols.JSON.encode(frame)) == frame
    assert codec.enc_deliver(1, "t", recs, 3) == m.encode(Deliver(1, "t", recs, 3))
    assert codec.enc_subok(1, 6, 3) == m.encode(SubOk(1, 6, 3))
    wrong = codec.enc_error(ErrorCode.WRONG_GROUP, "on", sid=1, group="g2", era=1, after=40)
    assert m.decode_broker(wrong) == Error.of(
        ErrorCode.WRONG_GROUP, "on", sid=1, group="g2", era=1, after=40
    )
    for plain in (Deliver(1, "t", recs), SubOk(1, 6), Error.of(ErrorCode.WRONG_GROUP, "x", sid=1)):
        assert not {"era", "after"} & set(msgpack.unpackb(m.encode(plain)))
    bad = codec.packb({"op": "sub", "sid": 1, "topic": "t", "from": 3, "era": -1})
    with pytest.raises(MalformedFrame):
        codec.decode_client(bad)


def test_optional_fields_take_their_documented_defaults() -> None:
    assert codec.decode_client(codec.packb({"op": "sub", "sid": 1, "topic": "t"})) == Sub(
        1, "t", None, From.LATEST, None
    )
    fetch = codec.decode_client(
        codec.packb({"op": "fetch", "id": 1, "topic": "t", "from": 1, "to": 9})
    )
    assert fetch == Fetch(1, "t", 1, 9, 10_000)
    assert codec.decode_client(codec.packb({"op": "meta"})) == Meta(0)
    assert codec.decode_client(codec.packb({"op": "hello", "client": 42})) == Hello("")


# --- limits and bad input -----------------------------------------------------------


def _pub(records: Any, topic: Any = "t", id: Any = 1) -> bytes:
    return codec.packb({"op": "pub", "id": id, "topic": topic, "records": records})


def test_frame_over_the_size_limit_is_too_large() -> None:
    data = _pub([[b"u", None, b"x" * 100, None]])
    assert isinstance(codec.decode_client(data, max_frame=len(data)), Pub)
    for decode in (codec.decode_client, repl.decode_repl, codec.decode_broker):
        with pytest.raises(FrameTooLarge):
            decode(data, max_frame=len(data) - 1)


def test_batch_and_value_limits() -> None:
    two = _pub([[b"u1", None, b"v", None], [b"u2", None, b"v", None]])
    decoded = codec.decode_client(two, max_records=2)
    assert isinstance(decoded, Pub) and len(decoded.records) == 2
    with pytest.raises(FrameTooLarge):
        codec.decode_client(two, max_records=1)
    ten = _pub([[b"u", None, b"x" * 10, None]])
    assert isinstance(codec.decode_client(ten, max_value=10), Pub)
    with pytest.raises(FrameTooLarge):
        codec.decode_client(ten, max_value=9)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param("a text frame", id="text-frame"),
        pytest.param(b"\xc1", id="reserved-byte"),
        pytest.param(codec.packb({"op": "ack", "sid": 1, "ts": 1}) + b"\x00", id="trailing-data"),
        pytest.param(codec.packb([1, 2, 3]), id="not-a-map"),
        pytest.param(codec.packb({"sid": 1}), id="no-op"),
        pytest.param(codec.packb({"op": 42}), id="int-op"),
        pytest.param(_pub([[b"", None, b"v", None]]), id="empty-uuid"),
        pytest.param(_pub([[b"u" * 65, None, b"v", None]]), id="long-uuid"),
        pytest.param(_pub([["u", None, b"v", None]]), id="str-uuid"),
        pytest.param(_pub([[b"u", "k", b"v", None]]), id="str-key"),
        pytest.param(_pub([[b"u", None, "v", None]]), id="str-value"),
        pytest.param(_pub([[b"u", None, b"v"]]), id="short-record"),
        pytest.param(_pub([[b"u", None, b"v", {"h": [1]}]]), id="list-header"),
        pytest.param(_pub([[b"u", None, b"v", {str(i): i for i in range(65)}]]), id="65-headers"),
        pytest.param(_pub([]), id="empty-batch"),
        pytest.param(_pub("nope"), id="records-not-array"),
        pytest.param(_pub([[b"u", None, b"v", None]], topic=""), id="empty-topic"),
        pytest.param(_pub([[b"u", None, b"v", None]], topic="t" * 250), id="long-topic"),
        pytest.param(_pub([[b"u", None, b"v", None]], topic=5), id="int-topic"),
        pytest.param(_pub([[b"u", None, b"v", None]], id=-1), id="negative-id"),
        pytest.param(_pub([[b"u", None, b"v", None]], id=True), id="bool-id"),
        pytest.param(codec.packb({"op": "ack", "sid": 1, "ts": 1.0}), id="float-ts"),
        pytest.param(
            codec.packb({"op": "sub", "sid": 1, "topic": "t", "from": "now"}), id="bad-from"
        ),
        pytest.param(codec.packb({"op": "sub", "sid": 1, "topic": "t", "from": -1}), id="neg-from"),
        pytest.param(
            codec.packb({"op": "sub", "sid": 1, "topic": "t", "window": 0}), id="window-0"
        ),
        pytest.param(
            codec.packb({"op": "sub", "sid": 1, "topic": "t", "subscription": ""}), id="no-name"
        ),
        pytest.param(
            codec.packb({"op": "fetch", "id": 1, "topic": "t", "from": 1, "to": 2, "max": 0}),
            id="max-0",
        ),
        pytest.param(_shared_sub(acked=5), id="acked-not-array"),
        pytest.param(_shared_sub(acked=[1, -2]), id="acked-negative"),
        pytest.param(_shared_sub(acked=[1, "2"]), id="acked-str"),
        pytest.param(_shared_sub(acked=[True]), id="acked-bool"),
        pytest.param(_shared_sub(acked=[1], mode="broadcast"), id="acked-broadcast"),
        pytest.param(_shared_sub(held=[1, -2]), id="held-negative"),
        pytest.param(_shared_sub(held=[1], mode="broadcast"), id="held-broadcast"),
    ],
)
def test_bad_client_frames_are_malformed(data: bytes | str) -> None:
    with pytest.raises(MalformedFrame) as info:
        codec.decode_client(data)
    assert info.value.code == ErrorCode.BAD_FRAME


def test_unknown_ops_are_reported_as_such() -> None:
    with pytest.raises(UnknownOp):
        codec.decode_client(codec.packb({"op": "teleport"}))
    with pytest.raises(UnknownOp):
        codec.decode_client(repl.enc_rack(1, 1))  # a replication frame on a client link
    with pytest.raises(UnknownOp):
        repl.decode_repl(codec.enc_client(Ack(1, 1)))  # a client frame on a replication link


# --- hostile input never escapes as anything but ProtocolError ---------------------

_DECODERS = (
    codec.decode_client,
    repl.decode_repl,
    codec.decode_broker,
    subprotocols.MSGPACK.decode_broker,
    subprotocols.MSGPACK.decode_client,
)


def _only_protocol_errors(data: bytes) -> None:
    for decode in _DECODERS:
        try:
            decode(data)
        except ProtocolError:
            pass


@given(st.binary(max_size=512))
@settings(max_examples=500)
def test_arbitrary_bytes_only_raise_protocol_errors(data: bytes) -> None:
    _only_protocol_errors(data)


@given(st.binary(max_size=256), st.binary(min_size=1, max_size=8), st.integers(0, 255))
def test_corrupted_valid_frames_only_raise_protocol_errors(
    frame: bytes, patch: bytes, at: int
) -> None:
    base = _pub([[b"u1", b"k", b"value", {"a": 1}], [b"u2", None, frame, None]])
    i = at % len(base)
    _only_protocol_errors(base[:i] + patch + base[i + len(patch) :])
    _only_protocol_errors(base[:i])


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
_anything = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)
_valid_frames = st.one_of(
    st.builds(Pub, ids, names, st.lists(pub_records, min_size=1, max_size=4)).map(codec.enc_client),
    client_frames.map(codec.enc_client),
    st.builds(repl.enc_append, ids, ids, ids, entries),
    st.builds(Follow, short_names, short_names, short_names, ids, ids, epoch_lists).map(
        repl.enc_follow
    ),
    st.builds(Leader, ids, ids, epoch_lists).map(repl.enc_leader),
    st.builds(repl.enc_rack, ids, ids),
)


def _mutate(draw: st.DrawFn, node: dict[Any, Any] | list[Any]) -> None:
    """Replace (or drop) one value somewhere inside ``node``, descending at random."""
    keys: list[Any] = sorted(node, key=str) if isinstance(node, dict) else list(range(len(node)))
    if not keys:
        return
    k = draw(st.sampled_from(keys))
    child = node[k]
    if isinstance(child, dict | list) and child and draw(st.integers(0, 3)) > 0:
        _mutate(draw, child)
    elif isinstance(node, dict) and k != "op" and draw(st.integers(0, 4)) == 0:
        del node[k]
    elif k != "op":
        node[k] = draw(_anything)


@st.composite
def _nearly_valid_frames(draw: st.DrawFn) -> dict[str, Any]:
    """A valid frame of any kind with one to three values anywhere in it made wrong."""
    frame: dict[str, Any] = msgpack.unpackb(draw(_valid_frames), raw=False)
    for _ in range(draw(st.integers(1, 3))):
        _mutate(draw, frame)
    return frame


@given(_nearly_valid_frames())
@settings(max_examples=600)
def test_nearly_valid_frames_only_raise_protocol_errors(frame: dict[str, Any]) -> None:
    _only_protocol_errors(msgpack.packb(frame, use_bin_type=True))


_wrong = (
    _scalars
    | st.lists(_scalars, min_size=1, max_size=3)
    | st.dictionaries(st.text(max_size=3), _scalars, min_size=1, max_size=2)
)


def _one_wrong(valid: st.SearchStrategy[tuple[Any, ...]]) -> st.SearchStrategy[tuple[Any, ...]]:
    """A valid tuple with exactly one of its fields replaced by a wrong value."""
    return st.builds(
        lambda t, i, bad: t[: i % len(t)] + (bad,) + t[i % len(t) + 1 :],
        valid,
        st.integers(0, 15),
        _wrong,
    )


_wild_pub = st.fixed_dictionaries(
    {
        "op": st.just("pub"),
        "id": ids,
        "topic": names,
        "records": st.lists(pub_records, max_size=2).flatmap(
            lambda ok: _one_wrong(pub_records).map(lambda bad: [*ok, bad])
        ),
    }
)
_wild_append = st.fixed_dictionaries(
    {
        "op": st.just("append"),
        "epoch": ids,
        "commit": ids,
        "entries": st.lists(_one_wrong(st.tuples(names, _one_wrong(stamped))), max_size=3),
    }
)


@given(_wild_pub | _wild_append)
@settings(max_examples=400)
def test_records_with_any_field_wrong_only_raise_protocol_errors(frame: dict[str, Any]) -> None:
    _only_protocol_errors(msgpack.packb(frame, use_bin_type=True))


@given(_anything)
def test_any_msgpack_value_only_raises_protocol_errors(value: Any) -> None:
    _only_protocol_errors(msgpack.packb(value, use_bin_type=True))


# --- spark support: published times, commit, skip_purged ----------------------------


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "commit", "id": 1, "topic": "t", "subscription": "s"},
        {"op": "commit", "id": 1, "topic": "t", "subscription": "", "ts": 3},
        {"op": "commit", "id": 1, "topic": "t", "subscription": "s", "ts": -1},
        {"op": "commit", "id": 1, "topic": "t", "subscription": "s", "ts": 3, "group": 7},
        {"op": "commit", "id": 1, "topic": "t", "subscription": "s", "ts": 3, "group": ""},
        {"op": "fetch", "id": 1, "topic": "t", "from": 1, "to": 2, "skip_purged": 1},
    ],
)
def test_bad_commit_and_fetch_fields_name_the_request(frame: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame) as e:
        codec.decode_client(codec.packb(frame))
    assert e.value.id == 1


def test_fetched_and_committed_encode_their_optional_fields() -> None:
    got = codec.decode_broker(codec.enc_fetched(4, [], 9, [(1, 100)], 8))
    assert got["published"] == ((1, 100),) and got["purged"] == 8
    assert "purged" not in codec.decode_broker(codec.enc_fetched(4, [], 9))
    assert codec.decode_broker(codec.enc_committed(2, 7, 10)) == {
        "op": "committed",
        "id": 2,
        "ts": 7,
        "head": 10,
    }


def test_spark_answers_round_trip_typed() -> None:
    frames = [
        Fetched(4, (), 9, ((1, 100), (5, 200)), 8),
        Fetched(4, (), 9),
        Committed(2, 7, 10),
        MetaReply(3, "g1", "b1", "primary", commit=12, topics=("a", "b")),
    ]
    for frame in frames:
        assert subprotocols.MSGPACK.decode_broker(subprotocols.MSGPACK.encode(frame)) == frame
    assert codec.enc_committed(2, 7, 10) == subprotocols.MSGPACK.encode(frames[2])
    plain = subprotocols.MSGPACK.decode_broker(codec.enc_meta(MetaReply(1, "g1", "b1", "backup")))
    assert isinstance(plain, MetaReply) and plain.topics is None and plain.commit == 0


# --- work bounds, integer bounds, nil, ext (issue 8) -------------------------------------


def _peak_bytes_of(decode: Any) -> int:
    """Peak Python memory while ``decode`` runs: what an element bomb costs the broker."""
    tracemalloc.start()
    try:
        decode()
    except ProtocolError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_a_flat_element_bomb_is_refused_from_its_header_with_the_request_id() -> None:
    bomb = codec.packb({"op": "pub", "id": 7, "topic": "t", "records": [0] * 8_000_000})
    with pytest.raises(FrameTooLarge) as e:
        codec.decode_client(bomb)
    assert e.value.id == 7
    # refused before anything is built: far less than the 64 MB the array alone would take
    assert _peak_bytes_of(lambda: codec.decode_client(bomb)) < len(bomb) // 10


def test_a_nested_element_bomb_stops_after_max_elements() -> None:
    """Each array is within msgpack's per-container limit; together they hold 8 M values."""
    bomb = codec.packb({"op": "pub", "id": 7, "x": [[0] * 80_000] * 100})
    with pytest.raises(FrameTooLarge) as e:
        codec.decode_client(bomb, max_elements=100_000)
    assert e.value.id == 7
    unbounded = _peak_bytes_of(lambda: msgpack.unpackb(bomb, use_list=False))
    bounded = _peak_bytes_of(lambda: codec.decode_client(bomb, max_elements=100_000))
    assert unbounded > 60_000_000 and bounded < unbounded // 10


def test_frames_within_the_element_cap_decode_as_before() -> None:
    records = [(b"u%d" % i, None, b"v" * 90, {"n": i}) for i in range(10_000)]
    data = codec.packb({"op": "pub", "id": 1, "topic": "t", "records": records})
    assert len(data) > 1_000_000  # decoded with the per-container count
    got = codec.decode_client(data)
    assert isinstance(got, Pub) and len(got.records) == 10_000 and got.records[-1] == records[-1]
    with pytest.raises(FrameTooLarge):
        codec.decode_client(data, max_elements=len(data) - 1 if len(data) < 40_000 else 40_000)


def test_a_map_with_too_many_keys_is_refused() -> None:
    frame = {"op": "meta", "id": 3, **{f"k{i}": i for i in range(codec.MAX_MAP_LEN)}}
    with pytest.raises(FrameTooLarge) as e:
        codec.decode_client(codec.packb(frame))
    assert e.value.id == 3


def test_a_container_claiming_more_values_than_the_frame_has_bytes_is_a_bad_frame() -> None:
    """Random bytes often start with a map or array header claiming billions of values:
    garbage, not a large frame (the broker answered TOO_LARGE to one of
    test_bad_input's random frames; it expects BAD_FRAME). A container really over its
    limit stays TOO_LARGE (above)."""
    for header in (b"\xdf\xcb\xd4\x7e\x08", b"\xdd\x00\x10\x00\x00"):  # map32, array32
        with pytest.raises(MalformedFrame):
            codec.decode_client(header + bytes(range(40)))


@pytest.mark.parametrize("n", [codec.MAX_ACK_TS + 1, 2 * codec.MAX_ACK_TS])
def test_ts_arrays_over_their_limit_are_too_large(n: int) -> None:
    for data in (
        _shared_sub(acked=[1] * n),
        _shared_sub(held=[1] * n),
        codec.packb({"op": "ack", "sid": 2, "ts": [1] * n}),
    ):
        with pytest.raises(FrameTooLarge) as e:
            codec.decode_client(data, max_records=3 * codec.MAX_ACK_TS)  # the field's own check
        assert e.value.sid == 2
        with pytest.raises(FrameTooLarge):
            codec.decode_client(data)  # msgpack's container limit


@pytest.mark.parametrize(
    "value",
    [msgpack.ExtType(5, b"xyz"), msgpack.Timestamp(1, 0)],
    ids=["ext", "timestamp"],
)
def test_ext_types_are_refused_anywhere_with_the_request_id(value: Any) -> None:
    for frame in (
        {"op": "pub", "id": 9, "topic": "t", "records": [[b"u", None, b"v", {"at": value}]]},
        {"op": "fetch", "id": 9, "topic": "t", "from": 1, "to": 2, "unknown": value},
    ):
        with pytest.raises(MalformedFrame) as e:
            codec.decode_client(msgpack.packb(frame, datetime=False))
        assert e.value.id == 9


def test_a_frame_that_fails_to_decode_still_names_its_request() -> None:
    good = codec.packb({"op": "commit", "id": 12, "sid": 3})
    broken = good[:-1] + b"\xc1"  # the last field's value is a reserved byte
    with pytest.raises(MalformedFrame) as e:
        codec.decode_client(broken)
    assert (e.value.id, e.value.sid) == (12, None)  # sid is the field that broke


def test_duplicate_keys_count_against_max_elements() -> None:
    """msgpack keeps the last of equal keys, so a map of 256 entries all named "a" is a
    dict of one: counted by its size it slipped past the element cap (an 8 MB frame of
    them cost ~150 ms). Entries are counted as read."""
    dup_map = b"\xde\x01\x00" + b"\xa1a\x00" * 256  # map16 of 256 x "a": 0
    maps = b"\xdd" + (2000).to_bytes(4, "big") + dup_map * 2000  # 512,000 entries
    frame = b"\x83\xa2op\xa3pub\xa2id\x07\xa1x" + maps
    with pytest.raises(FrameTooLarge) as e:
        codec.decode_client(frame, max_elements=100_000)
    assert e.value.id == 7
