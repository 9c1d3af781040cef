"""Frames to fuzz the codecs with: valid frames of every op, byte-level mutations of them,
and adversarial shapes of any size (used by test_codec_fuzz.py)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable

from tritonmq.devtools import vectors
from tritonmq.errors import ProtocolError
from tritonmq.wire import codec
from tritonmq.wire.subprotocols import JSON, MSGPACK

FRAMES = [f for _, f in vectors.CLIENT] + [f for _, f in vectors.BROKER]
PACKED = [MSGPACK.encode(f) for f in FRAMES]
TEXTS = [JSON.encode(f) for f in FRAMES]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one to four bytes flipped, inserted, deleted or runs duplicated."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(out) + 1)
        kind = rng.randrange(4)
        if kind == 0 and i < len(out):
            out[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            out[i:i] = bytes([rng.choice(b'"\\,:[]{}0123456789eE.-tfn\x00\x80\xc1\xdd\xde\xff')])
        elif kind == 2 and i < len(out):
            del out[i : i + rng.randint(1, 3)]
        else:
            out[i:i] = out[i : i + rng.randint(1, 16)]
    return bytes(out)


def only_protocol_errors(decode: Callable[[bytes | str], object], data: bytes | str) -> None:
    """Decode ``data``: a frame or a :class:`ProtocolError`, never anything else."""
    try:
        decode(data)
    except ProtocolError:
        pass


def _fill(head: str, unit: str, tail: str, size: int) -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


_TOP = '{"op":"pub","id":1,"topic":"t","x":'
_HEADERS = json.dumps({f"h{i}": i for i in range(64)}, separators=(",", ":"))
_MAP256 = json.dumps({f"k{i}": 0 for i in range(256)}, separators=(",", ":"))

JSON_SHAPES: dict[str, Callable[[int], str]] = {
    # the frame that froze a primary: a quote, escaped quotes, more commas than values allowed
    "quote, escaped quotes, commas": lambda n: '"' + '\\"' * (n // 64) + "," * (n - n // 32),
    "escaped quotes in a string": lambda n: _fill(_TOP + '"', '\\"', '"}', n),
    "many quotes": lambda n: _fill(_TOP + "[", '"",', '""]}', n),
    "unterminated escapes": lambda n: _fill(_TOP + '"', '\\"', "", n),
    "long integers": lambda n: _fill(_TOP + "[", "9" * 4000 + ",", "1]}", n),
    "long floats": lambda n: _fill(_TOP + "[", "1." + "9" * 300 + ",", "1]}", n),
    "deep nesting": lambda n: _TOP + "[" * (n // 2) + "]" * (n // 2) + "}",
    "nesting within the limit": lambda n: _fill(
        _TOP + "[", "[" * 10 + "1" + "]" * 10 + ",", "1]}", n
    ),
    "many small elements": lambda n: _fill(_TOP + "[", "[],", "[]]}", n),
    "many objects": lambda n: _fill(_TOP + "[", "{},", "{}]}", n),
    "maps of 256 entries": lambda n: _fill(_TOP + "[", _MAP256 + ",", "1]}", n),
    "duplicate keys": lambda n: _fill(_TOP + "[{", '"a":1,', '"a":1}]}', n),
    "records with headers": lambda n: _fill(
        '{"op":"pub","id":1,"topic":"t","records":[',
        f'["u",null,"v",{_HEADERS}],',
        '["u",null,"v",null]]}',
        n,
    ),
    "unicode escapes": lambda n: _fill(_TOP + '"', "\\ud83d\\ude00", '"}', n),
}


def _mp_top(body: bytes) -> bytes:
    return b"\x84\xa2op\xa3pub\xa2id\x01\xa5topic\xa1t\xa1x" + body


def _mp_arrays(unit: bytes, size: int) -> bytes:
    """Arrays of ``unit`` within the per-array limit, ``size`` bytes in all."""
    left, chunks = max(1, size // len(unit)), []
    while left > 0:
        k = min(left, 50_000)
        chunks.append(b"\xdd" + k.to_bytes(4, "big") + unit * k)
        left -= k
    return _mp_top(b"\xdd" + len(chunks).to_bytes(4, "big") + b"".join(chunks))


MSGPACK_SHAPES: dict[str, Callable[[int], bytes]] = {
    "empty maps": lambda n: _mp_arrays(b"\x80", n),
    "empty arrays": lambda n: _mp_arrays(b"\x90", n),
    "nested arrays": lambda n: _mp_arrays(b"\x91" * 10 + b"\x01", n),
    "maps of 256 entries": lambda n: _mp_arrays(codec.packb({f"k{i}": 0 for i in range(256)}), n),
    "maps of one key 256 times": lambda n: _mp_arrays(b"\xde\x01\x00" + b"\xa1a\x00" * 256, n),
    "small strings": lambda n: _mp_arrays(b"\xa2ab", n),
    "records with headers": lambda n: codec.packb(
        {
            "op": "pub",
            "id": 1,
            "topic": "t",
            "records": [(b"u", None, b"v", {f"h{i}": i for i in range(64)})] * (n // 390),
        }
    ),
}


def best_time(decode: Callable[[bytes | str], object], data: bytes | str, reps: int) -> float:
    """The least CPU time of ``reps`` decodes of ``data``: this thread's time, so that being
    preempted on a loaded machine (a long decode is, a short one fits a time slice) does not
    count, and the least, as caches shared with other work only ever add to it."""
    best = float("inf")
    for _ in range(reps):
        start = time.thread_time()
        only_protocol_errors(decode, data)
        best = min(best, time.thread_time() - start)
    return best
