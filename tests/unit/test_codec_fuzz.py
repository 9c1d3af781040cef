"""Both codecs under fuzzing: whatever the bytes, a frame or a ProtocolError, and the
time a decode takes grows linearly with the frame, whatever its shape."""

from __future__ import annotations

import json
import random
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.wirefuzz import (
    JSON_SHAPES,
    MSGPACK_SHAPES,
    PACKED,
    TEXTS,
    best_time,
    mutate,
    only_protocol_errors,
)
from tritonmq.wire.jsoncodec import JsonCodec
from tritonmq.wire.subprotocols import MsgpackCodec

MP = MsgpackCodec()
JS = JsonCodec()
_DECODERS = (MP.decode_client, MP.decode_broker, JS.decode_client, JS.decode_broker)


def _decode_all(data: bytes) -> None:
    """``data`` as a msgpack frame and, decoded as text a websocket would give, as JSON."""
    for decode in (MP.decode_client, MP.decode_broker):
        only_protocol_errors(decode, data)
    text = data.decode("utf-8", "replace")
    for decode in (JS.decode_client, JS.decode_broker):
        only_protocol_errors(decode, text)


def test_the_samples_cover_every_op_and_decode() -> None:
    ops = {msgpack.unpackb(p)["op"] for p in PACKED}
    assert len(ops) >= 20 and len(TEXTS) == len(PACKED)


def test_mutated_frames_of_every_op_only_raise_protocol_errors() -> None:
    rng = random.Random(26)
    for _ in range(40):
        for packed, text in zip(PACKED, TEXTS, strict=True):
            _decode_all(mutate(packed, rng))
            _decode_all(mutate(text.encode(), rng))


@given(st.sampled_from(range(len(PACKED))), st.randoms(use_true_random=False), st.booleans())
@settings(max_examples=400, deadline=None)
def test_any_mutation_of_a_real_frame_only_raises_protocol_errors(
    i: int, rng: random.Random, as_text: bool
) -> None:
    seed = TEXTS[i].encode() if as_text else PACKED[i]
    _decode_all(mutate(seed, rng))


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["op", "id", "sid", "b64", "records", "ts"])
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(_json_values, st.sampled_from(["pub", "ack", "sub", "hello", "fetch", "deliver", "meta"]))
@settings(max_examples=300, deadline=None)
def test_any_json_value_in_a_frame_only_raises_protocol_errors(value: Any, op: str) -> None:
    for text in (json.dumps(value), json.dumps({"op": op, "id": 1, "sid": 1, "x": value})):
        for decode in (JS.decode_client, JS.decode_broker):
            only_protocol_errors(decode, text)


@given(st.text(alphabet='"\\,:[]{}0123456789eE.-ufnr ab', max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_of_json_punctuation_only_raises_protocol_errors(text: str) -> None:
    for decode in (JS.decode_client, JS.decode_broker):
        only_protocol_errors(decode, text)


SMALL, LARGE = 16 * 1024, 1024 * 1024


def _per_byte_growth(decode: Any, make: Any, small_size: int = SMALL) -> float:
    small, large = make(small_size), make(LARGE)
    per_small = best_time(decode, small, reps=5) / len(small)
    per_large = best_time(decode, large, reps=3) / len(large)
    return per_large / per_small


@pytest.mark.parametrize("shape", list(JSON_SHAPES))
def test_json_decode_time_grows_linearly_with_the_frame(shape: str) -> None:
    """From 16 KB to 1 MB (64x) a decode's time per byte stays within 4x: a shape whose
    work grows faster than its size (a quadratic scan, a quadratic int()) is 64x slower."""
    assert _per_byte_growth(JS.decode_client, JSON_SHAPES[shape]) < 4


@pytest.mark.parametrize("shape", list(MSGPACK_SHAPES))
def test_msgpack_decode_time_grows_linearly_with_the_frame(shape: str) -> None:
    """On one path at both sizes: a frame longer than max_elements bytes is decoded with a
    count kept per container (a Python call each, ~150 ns), one shorter in C alone. From 128 KB
    (8x): a million fresh dicts cost more per byte than a hundred thousand, but not 8x."""
    uncounted = MsgpackCodec(max_elements=2 * LARGE)
    assert _per_byte_growth(uncounted.decode_client, MSGPACK_SHAPES[shape], 128 * 1024) < 4
