"""tritonmq.v1.json: refusals are typed, named when they can be, and bounded."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable

import pytest

from tritonmq.errors import FrameTooLarge, MalformedFrame, ProtocolError
from tritonmq.wire import codec
from tritonmq.wire.frames import Ack, Deliver, Pub
from tritonmq.wire.jsoncodec import MAX_DEPTH, JsonCodec, transcode

J = JsonCodec()


def _pub(value: object) -> str:
    return json.dumps({"op": "pub", "id": 7, "topic": "t", "records": [["u1", None, value, None]]})


@pytest.mark.parametrize(
    ("text", "error", "named"),
    [
        ("{", MalformedFrame, None),
        ("[1, 2]", MalformedFrame, None),
        ('"op"', MalformedFrame, None),
        ('{"id": 3}', MalformedFrame, 3),
        ('{"op": "ack", "sid": 1, "ts": NaN}', MalformedFrame, None),
        ('{"op": "ack", "sid": 1, "ts": 1.0}', MalformedFrame, 1),
        ('{"op": "ack", "sid": 1, "ts": 9007199254740992}', MalformedFrame, 1),
        ('{"op": "ack", "sid": true, "ts": 1}', MalformedFrame, None),
        ('{"op": "ack", "sid": 2, "ts": ' + "9" * 5000 + "}", MalformedFrame, 2),
        ('{"op": "ack", "sid": 2, "ts": -' + "9" * 5000 + "}", MalformedFrame, 2),
        (_pub({"b64": "not base64!"}), MalformedFrame, 7),
        (_pub({"b64": "AA==", "x": 1}), MalformedFrame, 7),
        (_pub(12), MalformedFrame, 7),
        ('{"op": "pub", "id": 8, "topic": "t", "records": []}', MalformedFrame, 8),
        ('{"op": "frobnicate", "id": 9}', ProtocolError, 9),
    ],
)
def test_bad_frames_are_refused_with_the_request_named_when_readable(
    text: str, error: type[ProtocolError], named: int | None
) -> None:
    with pytest.raises(error) as e:
        J.decode_client(text)
    assert (e.value.id or e.value.sid) == named


def test_a_binary_frame_is_refused_on_the_text_subprotocol() -> None:
    with pytest.raises(MalformedFrame, match="text frames"):
        J.decode_client(codec.enc_client(Ack(1, 2)))


def test_nesting_is_bounded_however_deep_the_frame() -> None:
    shallow = '{"op": "pub", "id": 4, "x": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"
    with pytest.raises(MalformedFrame, match="deeper") as e:
        J.decode_client(shallow)
    assert e.value.id == 4
    with pytest.raises(MalformedFrame):  # past the parser's own recursion limit too
        J.decode_client("[" * 200_000 + "]" * 200_000)


def test_elements_arrays_maps_and_bytes_are_bounded() -> None:
    small = JsonCodec(max_elements=100, max_records=10, max_frame=10_000)
    with pytest.raises(FrameTooLarge):
        small.decode_client(json.dumps({"op": "ack", "sid": 1, "x": [[0] * 60, [0] * 60]}))
    with pytest.raises(FrameTooLarge):  # acks allow MAX_ACK_TS ts; records fewer
        small.decode_client(json.dumps({"op": "ack", "sid": 1, "ts": list(range(100_001))}))
    with pytest.raises(FrameTooLarge):
        small.decode_client(json.dumps({"op": "hello", **{f"k{i}": 0 for i in range(300)}}))
    with pytest.raises(FrameTooLarge):
        small.decode_client(json.dumps({"op": "hello", "client": "x" * 10_000}))


def test_values_are_counted_before_the_frame_is_built() -> None:
    small = JsonCodec(max_elements=1000, max_value=100_000)
    with pytest.raises(FrameTooLarge, match="JSON values"):
        small.decode_client("[" + "[]," * 2000 + "[]]")  # ~2000 lists, never built
    commas = '"' + "a,[{" * 1000 + '"'  # structure inside a string is not counted
    frame = small.decode_client(_pub(commas.strip('"')))
    assert isinstance(frame, Pub) and frame.records[0][2] == commas.strip('"').encode()


def test_values_and_headers_keep_their_types() -> None:
    pub = Pub(1, "t", [(b"\xff" * 16, b"k", b"text", {"s": "x", "b": b"x", "i": -5, "f": 0.5})])
    text = J.encode(pub)
    assert json.loads(text)["records"][0][3]["b"] == {"b64": "eA=="}  # bin stays bin
    assert J.decode_client(text) == pub


def test_transcode_gives_what_the_codec_encodes() -> None:
    d = Deliver(1, "t", ((5, b"u", None, b"\x80", {"h": b"\x01"}),))
    assert transcode(codec.enc_broker(d)) == J.encode(d)
    assert J.decode_broker(J.encode(d)) == d


def test_mutated_frames_never_raise_anything_but_a_protocol_error() -> None:
    rng = random.Random(9)
    seed = J.encode(Pub(1, "t", [(b"\xff" * 16, b"k", b"v", {"h": b"\x01", "n": 2})]))
    alphabet = '{}[]",:0123456789-.eE truefalsnul\\b64'
    for _ in range(3000):
        chars = list(seed)
        for _ in range(rng.randint(1, 4)):
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        try:
            J.decode_client("".join(chars))
        except ProtocolError:
            pass


def test_transcode_never_fails_on_what_msgpack_carries_outside_records() -> None:
    frame = codec.packb({"op": "meta", "id": 1, "slots": {0: "g1"}, "extra": b"\xff"})
    assert json.loads(transcode(frame)) == {
        "op": "meta",
        "id": 1,
        "slots": {"0": "g1"},
        "extra": {"b64": "/w=="},
    }


@pytest.mark.parametrize(
    "text",
    [
        r'{"op": "pub", "id": 5, "topic": "\ud800", "records": [["u", null, "v", null]]}',
        r'{"op": "pub", "id": 5, "topic": "t", "records": [["u", null, "\udfff", null]]}',
        r'{"op": "pub", "id": 5, "topic": "t", "records": [["u", null, "v", {"\ud800": 1}]]}',
    ],
)
def test_a_lone_surrogate_is_a_bad_frame_not_an_encoding_crash_later(text: str) -> None:
    """JSON escapes can spell text UTF-8 cannot hold; msgpack would fail to encode it on the
    way out (a topic in a ``deliver``), so it is refused on the way in."""
    with pytest.raises(MalformedFrame) as e:
        J.decode_client(text)
    assert e.value.id == 5


def test_a_surrogate_pair_is_one_character_and_welcome() -> None:
    text = r'{"op": "pub", "id": 5, "topic": "t", "records": [["u", null, "\ud83d\ude00", null]]}'
    frame = J.decode_client(text)
    assert isinstance(frame, Pub) and frame.records[0][2] == "😀".encode()


def test_numbers_json_cannot_write_back_are_refused_in_and_named_out() -> None:
    with pytest.raises(MalformedFrame, match="out of range") as e:
        J.decode_client(_pub("v").replace("null]]", '{"x": 1e400}]]'))
    assert e.value.id == 7
    # a tritonmq.v1 publisher may send NaN; a JSON subscriber still gets its deliver
    nan = float("nan")
    d = Deliver(1, "t", ((5, b"u", None, b"v", {"a": nan, "b": -float("inf"), "c": 0.5}),))
    assert json.loads(transcode(codec.enc_broker(d)))["records"][0][4] == {
        "a": "NaN",
        "b": "-Infinity",
        "c": 0.5,
    }


def _best_of(decode: Callable[[str], object], text: str, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        try:
            decode(text)
        except ProtocolError:
            pass
        best = min(best, time.perf_counter() - start)
    return best


def test_escaped_quotes_before_many_commas_are_counted_in_linear_time() -> None:
    """One quote, escaped quotes and more commas than max_elements: the count of values
    outside strings scanned to the end of the frame from every quote (~15 ms each; one
    ~1 MB frame froze a primary 22 s). It is one pass now, whatever the quotes."""
    small = JsonCodec(max_elements=100_000)
    text = '"' + '\\"' * 300 + "," * 200_000
    assert _best_of(small.decode_client, text, reps=1) < 0.5  # ~4 s before


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"op": "ack", "sid": 4, "ts": 1, "ts": 2}', 4),
        ('{"op": "ack", "op": "ack", "sid": 4, "ts": 1}', 4),
        ('{"op": "ack", "sid": 4, "sid": 5, "ts": 1}', None),  # which request is ambiguous
        (_pub("v").replace("null]]", '{"h": 1, "h": 2}]]'), 7),
        ('{"op": "meta", "id": 3, "x": [{"a": {"b": 1, "b": 1}}]}', 3),
    ],
)
def test_duplicate_keys_are_a_bad_frame_at_any_depth(text: str, named: int | None) -> None:
    """JSON.parse and json.loads keep the last of two equal keys, other parsers the first:
    a frame that means different things to different readers is refused."""
    with pytest.raises(MalformedFrame, match="duplicate key") as e:
        J.decode_client(text)
    assert (e.value.id or e.value.sid) == named


def test_integers_of_thousands_of_digits_cost_no_more_than_a_string_of_their_size() -> None:
    """int() of a digit string is quadratic: a frame of 4000-digit integers (each under
    Python's 4300-digit limit) cost ~25 ns a byte, 25x a string of its size. An integer of
    more than 16 digits is beyond 2^53 - 1, so it is refused unconverted."""
    big = JsonCodec(max_frame=4_000_000)
    digits = '{"op": "ack", "sid": 2, "x": [' + ",".join(["9" * 4000] * 500) + "], "
    text = '{"op": "ack", "sid": 2, "x": "' + "a" * (len(digits) - 30) + '"}'
    ints = _best_of(big.decode_client, digits + '"ts": 1}')
    string = _best_of(big.decode_client, text)
    assert ints < 8 * string + 0.005
