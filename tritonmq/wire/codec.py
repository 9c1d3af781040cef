"""msgpack codec for ``tritonmq.v1`` (``tritonmq.repl.v1`` is :mod:`tritonmq.wire.repl`;
the codec objects per subprotocol are :mod:`tritonmq.wire.subprotocols`).

Decoders check size, shape and types before anything else trusts a frame and
raise a :class:`~tritonmq.errors.ProtocolError` subclass; they never raise
anything else. Encoders build plain maps: the hot ones (``deliver``,
``puback``) take already-stamped record tuples so nothing is converted record
by record.
"""

from __future__ import annotations

import gc
import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import msgpack

from tritonmq.errors import FrameTooLarge, MalformedFrame, ProtocolError, UnknownOp
from tritonmq.wire import statscodec
from tritonmq.wire.fields import (
    MAX_SAFE_INT,
    headers_field,
    int_field,
    opt,
    opt_int,
    opt_str,
    published_pairs,
    str_field,
    str_map,
    ts_ok,
)
from tritonmq.wire.frames import (
    DURABILITY_LEVELS,
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
    Pub,
    PubAck,
    PubRecord,
    Record,
    SlotInfo,
    SlotMove,
    Stats,
    StatsReply,
    Sub,
    SubDelete,
    SubInfo,
    SubOk,
    SubReset,
    Unsub,
)
from tritonmq.wire.presencecodec import decode as decode_presence
from tritonmq.wire.presencecodec import event_map, members_map
from tritonmq.wire.presencecodec import sub_fields as presence_fields

DEFAULT_MAX_FRAME = 8 * 1024 * 1024
# msgpack's message for a container over its limit: "<claimed length> exceeds max_..."
_CLAIMED = re.compile(r"(\d+) exceeds max_")
MAX_TOPIC_LEN = 249
MAX_NAME_LEN = 249
MAX_UUID_LEN = 64
MAX_PROOF_LEN = 64  # a challenge nonce, a follow's proof (HMAC-SHA256: 32 bytes)
MAX_TOKEN_LEN = 16 * 1024  # a JWT in `hello`; RS256 with a few claims is ~1 KiB
MAX_ACK_TS = 100_000  # ts in one `ack`, or in the `acked` (or `held`) of one `sub`
MAX_MEMBER_LEN = 64  # a shared member's id
DEFAULT_MAX_ELEMENTS = 1_000_000  # msgpack values in one client frame, all containers together
MAX_MAP_LEN = 256  # entries in any one map of a client frame (headers: 64)
MAX_SALVAGE_KEYS = 64  # keys read from a refused frame while looking for its id and sid

_packb = msgpack.Packer(use_bin_type=True).pack


def packb(obj: Any) -> bytes:
    """Encode one frame (maps, lists, tuples, str, bytes, ints, None)."""
    return _packb(obj)


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection while a frame is decoded: decoding builds trees (no
    cycles to find), and the collector, run every few hundred containers built, traversed
    all that were built so far: a frame of 500,000 small arrays took ~1.2 s to parse instead
    of ~40 ms. Objects are counted as usual, so the next collection comes as it would."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _unpack(data: bytes | str, max_frame: int) -> dict[str, Any]:
    if isinstance(data, str):
        raise MalformedFrame("text frame on a binary subprotocol; send msgpack in binary frames")
    if len(data) > max_frame:
        raise FrameTooLarge(f"frame of {len(data)} bytes exceeds the limit of {max_frame}")
    try:
        obj = msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise MalformedFrame(f"not a msgpack frame: {type(e).__name__}") from None
    except Exception as e:  # msgpack may raise others on hostile input; never let them escape
        raise MalformedFrame(f"not a msgpack frame: {type(e).__name__}") from None
    return _frame_map(obj)


def _frame_map(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise MalformedFrame("a frame must be a map")
    op = obj.get("op")
    if not isinstance(op, str):
        raise MalformedFrame("a frame needs a string 'op'")
    return obj


def _unpack_client(data: bytes | str, max_frame: int, max_elements: int, max_array: int) -> Any:
    """Decode a client frame with its work bounded, not only its bytes.

    Every msgpack value takes at least one byte, so a frame of at most ``max_elements`` bytes
    cannot hold more; a larger one is decoded with a count kept per container, which stops a
    frame of millions of tiny values (an "element bomb") after ``max_elements`` of them.
    """
    if isinstance(data, str):
        raise MalformedFrame("text frame on a binary subprotocol; send msgpack in binary frames")
    if len(data) > max_frame:
        raise FrameTooLarge(f"frame of {len(data)} bytes exceeds the limit of {max_frame}")
    # msgpack's own per-container limits refuse an oversized container from its header,
    # before anything is built; ext types (the timestamp extension included) are refused.
    limits: dict[str, Any] = {
        "max_array_len": max_array,
        "max_map_len": MAX_MAP_LEN,
        "max_ext_len": 0,
    }
    if len(data) > max_elements:
        count = 0

        def counted(container: Any) -> Any:
            nonlocal count
            count += len(container)
            if count > max_elements:
                raise FrameTooLarge(f"frame holds more than {max_elements} msgpack values")
            return container

        def pairs(entries: list[tuple[Any, Any]]) -> dict[Any, Any]:
            # entries as read: a map of 256 times the same key is a dict of one, and
            # counted by its size it slipped past the cap
            nonlocal count
            count += len(entries)
            if count > max_elements:
                raise FrameTooLarge(f"frame holds more than {max_elements} msgpack values")
            return dict(entries)

        limits["list_hook"] = counted
        limits["object_pairs_hook"] = pairs
    try:
        with paused_gc():
            return msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=True, **limits)
    except FrameTooLarge:
        raise
    except ValueError as e:
        if "exceeds max_ext_len" in str(e):
            raise MalformedFrame("msgpack ext types are not accepted") from None
        if "exceeds max_" in str(e):  # msgpack's container limits
            claimed = _CLAIMED.match(str(e))
            if claimed and int(claimed.group(1)) > len(data):
                # every value takes a byte at least: a header claiming more values than the
                # frame has bytes is garbage (random bytes often read so), not a large frame
                msg = f"a container claims {claimed.group(1)} values in a {len(data)}-byte frame"
                raise MalformedFrame(msg) from None
            raise FrameTooLarge(f"frame refused: {e}") from None
        raise MalformedFrame(f"not a msgpack frame: {type(e).__name__}") from None
    except Exception as e:  # msgpack may raise others on hostile input; never let them escape
        raise MalformedFrame(f"not a msgpack frame: {type(e).__name__}") from None


def _salvage(data: bytes | str, e: ProtocolError, max_array: int) -> None:
    """A frame refused while decoding still names its request when its ``id`` or ``sid``
    can be read before the bad part: read the top map's keys in order, skipping values."""
    if isinstance(data, str):
        return
    try:
        u = msgpack.Unpacker(
            io.BytesIO(data),  # read in small chunks: no copy of a large frame
            read_size=16 * 1024,
            raw=False,
            max_array_len=max_array,
            max_map_len=MAX_MAP_LEN,
            max_ext_len=0,
            max_str_len=1024,
        )
        for _ in range(min(u.read_map_header(), MAX_SALVAGE_KEYS)):
            key = u.unpack()
            if key in ("id", "sid"):
                v = u.unpack()
                if type(v) is int and 0 <= v <= MAX_SAFE_INT:
                    setattr(e, key, v)
            else:
                u.skip()
    except Exception:  # the bad part: what was read so far is all there is
        return


def _pub_records(raw: Any, max_records: int, max_value: int) -> list[PubRecord]:
    if not isinstance(raw, tuple) or not raw:
        raise MalformedFrame("'records' must be a non-empty array")
    if len(raw) > max_records:
        raise FrameTooLarge(f"batch of {len(raw)} records exceeds the limit of {max_records}")
    out: list[PubRecord] = []
    append = out.append
    for r in raw:
        if type(r) is not tuple or len(r) != 4:
            raise MalformedFrame("a record is [uuid, key, value, headers]")
        u, k, v, h = r
        if type(u) is not bytes or not 0 < len(u) <= MAX_UUID_LEN:
            raise MalformedFrame("a record's uuid must be 1..64 bytes (16 recommended)")
        if k is not None and type(k) is not bytes:
            raise MalformedFrame("a record's key must be bytes or nil")
        if type(v) is not bytes:
            raise MalformedFrame("a record's value must be bytes")
        if len(v) > max_value:
            raise FrameTooLarge(f"value of {len(v)} bytes exceeds the limit of {max_value}")
        if h is not None:
            h = headers_field(h)
        append((u, k, v, h))
    return out


def decode_client(
    data: bytes | str,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    max_records: int = 10_000,
    max_value: int = 1024 * 1024,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> ClientFrame:
    """Decode a frame a client sent to a broker.

    A refused frame raises with its ``id`` or ``sid`` attached when they can be read (a
    non-negative int up to 2^53 - 1), so the error frame can name the request it refuses.
    """
    max_array = max(MAX_ACK_TS, max_records)
    try:
        obj = _frame_map(_unpack_client(data, max_frame, max_elements, max_array))
    except ProtocolError as e:
        _salvage(data, e, max_array)
        raise
    try:
        return _client_frame(obj, max_records, max_value)
    except ProtocolError as e:
        for attr in ("id", "sid"):
            v = obj.get(attr)
            if ts_ok(v):
                setattr(e, attr, v)
        raise


def _client_frame(obj: dict[str, Any], max_records: int, max_value: int) -> ClientFrame:
    op = obj["op"]
    if op == "pub":
        durability = opt(obj, "durability", "")
        if durability != "" and durability not in DURABILITY_LEVELS:
            raise MalformedFrame(f"'durability' must be one of {', '.join(DURABILITY_LEVELS)}")
        return Pub(
            int_field(obj, "id"),
            str_field(obj, "topic", max_len=MAX_TOPIC_LEN),
            _pub_records(obj.get("records"), max_records, max_value),
            durability,
        )
    if op == "ack":
        ts = obj.get("ts")
        if type(ts) is tuple and len(ts) > MAX_ACK_TS:
            raise FrameTooLarge(f"'ts' holds {len(ts)} ts; the limit is {MAX_ACK_TS}")
        if type(ts) is tuple and ts:
            if not all(map(ts_ok, ts)):
                raise MalformedFrame("'ts' must be a ts or an array of ts from 0 to 2^53 - 1")
            return Ack(int_field(obj, "sid"), ts[0], ts[1:])
        return Ack(int_field(obj, "sid"), int_field(obj, "ts"))
    if op == "nack":
        return Nack(int_field(obj, "sid"), int_field(obj, "ts"))
    if op == "sub":
        start_raw = opt(obj, "from", "latest")
        start: From | int
        if ts_ok(start_raw):
            start = start_raw
        elif start_raw in ("latest", "earliest"):
            start = From(start_raw)
        else:
            raise MalformedFrame("'from' must be 'latest', 'earliest' or a ts >= 0")
        window = obj.get("window")
        if window is not None:
            window = int_field(obj, "window", minimum=1)
        name = obj.get("subscription")
        if name is not None and (not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_LEN):
            raise MalformedFrame("'subscription' must be a non-empty string")
        mode = opt(obj, "mode", "broadcast")
        if mode not in ("broadcast", "shared"):
            raise MalformedFrame("'mode' must be 'broadcast' or 'shared'")
        if mode == "shared" and name is None:
            raise MalformedFrame("a shared subscription needs a 'subscription' name")
        resume = opt(obj, "resume", False)
        if type(resume) is not bool:
            raise MalformedFrame("'resume' must be a boolean")
        acked = _ts_list(obj, "acked", mode)
        held = _ts_list(obj, "held", mode)
        member = obj.get("member", "")
        if not isinstance(member, str) or len(member) > MAX_MEMBER_LEN:
            raise MalformedFrame(f"'member' must be a string of at most {MAX_MEMBER_LEN} chars")
        if member and mode != "shared":
            raise MalformedFrame("'member' is for shared subscriptions only")
        presence, info = presence_fields(obj)
        topic = str_field(obj, "topic", max_len=MAX_TOPIC_LEN)
        sid = int_field(obj, "sid")
        era = int_field(obj, "era", default=0)
        return Sub(
            sid, topic, name, start, window, mode, resume, acked, held, member, presence, info, era
        )
    if op == "unsub":
        return Unsub(int_field(obj, "sid"))
    if op == "hello":
        client = opt(obj, "client", "")
        token = opt(obj, "token", None)
        if token is not None and (not isinstance(token, str) or len(token) > MAX_TOKEN_LEN):
            raise MalformedFrame(f"'token' must be a string of at most {MAX_TOKEN_LEN} characters")
        return Hello(client if isinstance(client, str) else "", token or None)
    if op == "meta":
        return Meta(int_field(obj, "id", default=0))
    if op == "fetch":
        skip = opt(obj, "skip_purged", False)
        if type(skip) is not bool:
            raise MalformedFrame("'skip_purged' must be a boolean")
        return Fetch(
            int_field(obj, "id"),
            str_field(obj, "topic", max_len=MAX_TOPIC_LEN),
            int_field(obj, "from"),
            int_field(obj, "to"),
            int_field(obj, "max", minimum=1, default=10_000),
            skip,
        )
    if op == "commit":
        return Commit(
            int_field(obj, "id"),
            str_field(obj, "topic", max_len=MAX_TOPIC_LEN),
            str_field(obj, "subscription", max_len=MAX_NAME_LEN),
            int_field(obj, "ts"),
            str_field(obj, "group", max_len=MAX_NAME_LEN, optional=True) or None,
        )
    if op in ("subdel", "subreset"):
        return _sub_admin(obj, op)
    if op == "presence":
        return Presence(int_field(obj, "id"), str_field(obj, "topic", max_len=MAX_TOPIC_LEN))
    if op == "stats":
        return statscodec.decode_request(obj)
    if op == "slotmove":
        return SlotMove(
            int_field(obj, "id"),
            int_field(obj, "slot"),
            str_field(obj, "to", max_len=MAX_NAME_LEN),
        )
    raise UnknownOp(f"unknown op {op[:40]!r}")


def _sub_admin(obj: dict[str, Any], op: str) -> SubDelete | SubReset:
    """``subdel`` / ``subreset``: admin ops on a durable subscription."""
    rid = int_field(obj, "id")
    topic = str_field(obj, "topic", max_len=MAX_TOPIC_LEN)
    name = str_field(obj, "subscription", max_len=MAX_NAME_LEN)
    execute = opt(obj, "execute", False)
    if type(execute) is not bool:
        raise MalformedFrame("'execute' must be a boolean")
    if op == "subdel":
        return SubDelete(rid, topic, name, execute)
    to_raw = obj.get("to")
    to: From | int
    if isinstance(to_raw, int) and ts_ok(to_raw):
        to = to_raw
    elif to_raw in ("latest", "earliest"):
        to = From(to_raw)
    else:
        raise MalformedFrame("'to' must be 'earliest', 'latest' or a ts from 0 to 2^53 - 1")
    return SubReset(rid, topic, name, to, execute)


def _ts_list(obj: dict[str, Any], field: str, mode: str) -> tuple[int, ...]:
    """A shared ``sub``'s ``acked`` or ``held``: at most MAX_ACK_TS ts >= 0."""
    raw = opt(obj, field, ())
    if type(raw) is tuple and len(raw) > MAX_ACK_TS:
        raise FrameTooLarge(f"'{field}' holds {len(raw)} ts; the limit is {MAX_ACK_TS}")
    if type(raw) is not tuple or not all(map(ts_ok, raw)):
        raise MalformedFrame(f"'{field}' must be an array of ts from 0 to 2^53 - 1")
    if raw and mode != "shared":
        raise MalformedFrame(f"'{field}' is for shared subscriptions only")
    return raw


def decode_broker(data: bytes | str, *, max_frame: int = 64 * 1024 * 1024) -> dict[str, Any]:
    """Decode a frame a broker sent to a client as a plain map (tests and tools);
    the client uses :meth:`MsgpackCodec.decode_broker`, which returns typed frames."""
    return _unpack(data, max_frame)


def _record_ok(r: Any) -> bool:
    return type(r) is tuple and len(r) == 5 and ts_ok(r[0])


def _records(raw: Any) -> tuple[Record, ...]:
    """Delivered records keep the tuples msgpack built. The client reads the ts of the first
    and last record to drop redeliveries, so those two are checked; checking every record
    would cost the consumer's hot path a Python loop (the broker is not an adversary here)."""
    if type(raw) is not tuple:
        raise MalformedFrame("'records' must be an array")
    if raw and not (_record_ok(raw[0]) and _record_ok(raw[-1])):
        raise MalformedFrame("a delivered record is [ts, uuid, key, value, headers]")
    return raw


def _broker_frame(obj: dict[str, Any]) -> BrokerFrame:
    op = obj["op"]
    if op in ("join", "leave", "members"):
        return decode_presence(obj)
    if op == "deliver":
        return Deliver(
            int_field(obj, "sid"),
            str_field(obj, "topic", max_len=MAX_TOPIC_LEN),
            _records(obj.get("records")),
            int_field(obj, "era", default=0),
        )
    if op == "puback":
        ts = obj.get("ts")
        if type(ts) is not tuple or not all(map(ts_ok, ts)):
            raise MalformedFrame("'ts' must be an array of integers from 0 to 2^53 - 1")
        eras = obj.get("eras", ())
        if type(eras) is not tuple or len(eras) not in (0, len(ts)) or not all(map(ts_ok, eras)):
            raise MalformedFrame("'eras' must be an array of integers, one per ts")
        return PubAck(int_field(obj, "id"), ts, opt_str(obj, "group") or "", eras)
    if op == "subok":
        return SubOk(
            int_field(obj, "sid"), int_field(obj, "next"), int_field(obj, "era", default=0)
        )
    if op == "fetched":
        return Fetched(
            int_field(obj, "id"),
            _records(obj.get("records")),
            int_field(obj, "next"),
            published_pairs(obj),
            opt_int(obj, "purged"),
        )
    if op == "committed":
        return Committed(int_field(obj, "id"), int_field(obj, "ts"), int_field(obj, "head"))
    if op == "error":
        raw_code = obj.get("code")
        if not isinstance(raw_code, str):
            raise MalformedFrame("'code' must be a string")
        known = ErrorCode.known(raw_code)
        retriable = obj.get("retriable")
        return Error(
            known if known is not None else raw_code,
            opt_str(obj, "message") or "",
            known.retriable if known is not None else retriable is True,
            opt_int(obj, "id"),
            opt_int(obj, "sid"),
            opt_str(obj, "primary"),
            opt_str(obj, "group"),
            opt_int(obj, "first"),
            opt_int(obj, "last"),
            opt_int(obj, "era"),
            opt_int(obj, "after"),
        )
    if op == "subinfo":
        action = obj.get("action")
        if action not in ("delete", "reset"):
            raise MalformedFrame("'action' must be 'delete' or 'reset'")
        return SubInfo(
            int_field(obj, "id"),
            str_field(obj, "topic", max_len=MAX_TOPIC_LEN),
            str_field(obj, "subscription", max_len=MAX_NAME_LEN),
            opt_str(obj, "mode") or "broadcast",
            opt_str(obj, "owner") or "",
            int_field(obj, "offset"),
            int_field(obj, "consumers", default=0),
            action,
            opt_int(obj, "to"),
            obj.get("executed") is True,
        )
    if op == "stats":
        return statscodec.decode_reply(obj)
    if op == "slotinfo":
        return SlotInfo(
            int_field(obj, "id"),
            int_field(obj, "slot"),
            str_field(obj, "owner", max_len=MAX_NAME_LEN),
            int_field(obj, "era"),
            str_field(obj, "state", max_len=MAX_NAME_LEN),
            str_field(obj, "to", max_len=MAX_NAME_LEN),
        )
    if op == "meta":
        role = obj.get("role")
        if role not in ("primary", "backup"):
            raise MalformedFrame("'role' must be 'primary' or 'backup'")
        isr = obj.get("isr", ())
        if type(isr) is not tuple or not all(isinstance(b, str) for b in isr):
            raise MalformedFrame("'isr' must be an array of strings")
        groups = obj.get("groups")
        slots = obj.get("slots")
        topics = obj.get("topics")
        if topics is not None and (
            type(topics) is not tuple or not all(isinstance(t, str) for t in topics)
        ):
            raise MalformedFrame("'topics' must be an array of strings")
        return MetaReply(
            int_field(obj, "id", default=0),
            opt_str(obj, "group") or "",
            opt_str(obj, "broker") or "",
            role,
            int_field(obj, "epoch", default=0),
            opt_str(obj, "primary"),
            opt_str(obj, "primary_url"),
            isr,
            str_map(obj.get("members", {}), "members"),
            int_field(obj, "bytes", default=0),
            int_field(obj, "records", default=0),
            None if groups is None else str_map(groups, "groups"),
            None if slots is None else str_map(slots, "slots"),
            int_field(obj, "commit", default=0),
            topics,
        )
    raise UnknownOp(f"unknown broker op {op[:40]!r}")


# --- encoders ---------------------------------------------------------------


def enc_error(
    code: ErrorCode,
    message: str,
    *,
    id: int | None = None,
    sid: int | None = None,
    primary: str | None = None,
    group: str | None = None,
    first: int | None = None,
    last: int | None = None,
    era: int | None = None,
    after: int | None = None,
) -> bytes:
    e = Error.of(
        code, message, id=id, sid=sid, primary=primary, group=group, first=first, last=last
    )
    return _packb(_error_map(replace(e, era=era, after=after) if era is not None else e))


def _error_map(e: Error) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "op": "error",
        "code": str(e.code),
        "message": e.message,
        "retriable": e.retriable,
    }
    if e.id is not None:
        frame["id"] = e.id
    if e.sid is not None:
        frame["sid"] = e.sid
    if e.primary:
        frame["primary"] = e.primary
    if e.group:
        frame["group"] = e.group
    if e.first is not None:
        frame["first"] = e.first
    if e.last is not None:
        frame["last"] = e.last
    if e.era is not None:
        frame["era"], frame["after"] = e.era, e.after
    return frame


def _meta_map(m: MetaReply) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "op": "meta",
        "id": m.id,
        "group": m.group,
        "broker": m.broker,
        "role": m.role,
        "epoch": m.epoch,
        "primary": m.primary,
        "primary_url": m.primary_url,
        "isr": m.isr,
        "members": m.members,
        "bytes": m.bytes,
        "records": m.records,
        "commit": m.commit,
    }
    if m.topics is not None:
        frame["topics"] = m.topics
    if m.groups is not None:
        frame["groups"] = m.groups
    if m.slots is not None:
        frame["slots"] = m.slots
    return frame


def enc_meta(m: MetaReply) -> bytes:
    return _packb(_meta_map(m))


def enc_puback(id: int, ts: Sequence[int], group: str, eras: Sequence[int] = ()) -> bytes:
    frame: dict[str, Any] = {"op": "puback", "id": id, "ts": ts, "group": group}
    if eras:
        frame["eras"] = eras
    return _packb(frame)


def enc_deliver(sid: int, topic: str, records: Sequence[Record], era: int = 0) -> bytes:
    if era:
        return _packb({"op": "deliver", "sid": sid, "topic": topic, "records": records, "era": era})
    return _packb({"op": "deliver", "sid": sid, "topic": topic, "records": records})


def enc_subok(sid: int, next_ts: int, era: int = 0) -> bytes:
    if era:
        return _packb({"op": "subok", "sid": sid, "next": next_ts, "era": era})
    return _packb({"op": "subok", "sid": sid, "next": next_ts})


def enc_fetched(
    id: int,
    records: Sequence[Record],
    next_ts: int,
    published: Sequence[tuple[int, int]] = (),
    purged: int | None = None,
) -> bytes:
    frame: dict[str, Any] = {"op": "fetched", "id": id, "records": records, "next": next_ts}
    if published:
        frame["published"] = published
    if purged is not None:
        frame["purged"] = purged
    return _packb(frame)


def enc_subinfo(info: SubInfo) -> bytes:
    return _packb(
        {
            "op": "subinfo",
            "id": info.id,
            "topic": info.topic,
            "subscription": info.subscription,
            "mode": info.mode,
            "owner": info.owner or None,
            "offset": info.offset,
            "consumers": info.consumers,
            "action": info.action,
            "to": info.to,
            "executed": info.executed,
        }
    )


def enc_slotinfo(info: SlotInfo) -> bytes:
    return _packb(
        {
            "op": "slotinfo",
            "id": info.id,
            "slot": info.slot,
            "owner": info.owner,
            "era": info.era,
            "state": info.state,
            "to": info.to,
        }
    )


def enc_committed(id: int, ts: int, head: int) -> bytes:
    return _packb({"op": "committed", "id": id, "ts": ts, "head": head})


def enc_client(frame: ClientFrame) -> bytes:
    """Encode a client frame (used by the Python client and tests)."""
    if isinstance(frame, Pub):
        pub = {"op": "pub", "id": frame.id, "topic": frame.topic, "records": frame.records}
        if frame.durability:
            pub["durability"] = frame.durability
        return _packb(pub)
    if isinstance(frame, Ack):
        ts: int | tuple[int, ...] = (frame.ts, *frame.many) if frame.many else frame.ts
        return _packb({"op": "ack", "sid": frame.sid, "ts": ts})
    if isinstance(frame, Nack):
        return _packb({"op": "nack", "sid": frame.sid, "ts": frame.ts})
    if isinstance(frame, Sub):
        d: dict[str, Any] = {
            "op": "sub",
            "sid": frame.sid,
            "topic": frame.topic,
            "from": frame.start,
        }
        if isinstance(frame.start, From):
            d["from"] = str(frame.start)
        if frame.subscription is not None:
            d["subscription"] = frame.subscription
        if frame.mode != "broadcast":
            d["mode"] = frame.mode
        if frame.resume:
            d["resume"] = True
        if frame.window is not None:
            d["window"] = frame.window
        if frame.acked:
            d["acked"] = frame.acked
        if frame.held:
            d["held"] = frame.held
        if frame.member:
            d["member"] = frame.member
        if frame.presence:
            d["presence"] = True
        if frame.info:
            d["info"] = frame.info
        if frame.era:
            d["era"] = frame.era
        return _packb(d)
    if isinstance(frame, Unsub):
        return _packb({"op": "unsub", "sid": frame.sid})
    if isinstance(frame, Hello):
        hello: dict[str, Any] = {"op": "hello", "client": frame.client}
        if frame.token:
            hello["token"] = frame.token
        return _packb(hello)
    if isinstance(frame, Meta):
        return _packb({"op": "meta", "id": frame.id})
    if isinstance(frame, Fetch):
        f: dict[str, Any] = {
            "op": "fetch",
            "id": frame.id,
            "topic": frame.topic,
            "from": frame.start,
            "to": frame.end,
            "max": frame.max,
        }
        if frame.skip_purged:
            f["skip_purged"] = True
        return _packb(f)
    if isinstance(frame, Commit):
        c: dict[str, Any] = {
            "op": "commit",
            "id": frame.id,
            "topic": frame.topic,
            "subscription": frame.subscription,
            "ts": frame.ts,
        }
        if frame.group is not None:
            c["group"] = frame.group
        return _packb(c)
    if isinstance(frame, SubDelete | SubReset):
        a: dict[str, Any] = {
            "op": "subdel" if isinstance(frame, SubDelete) else "subreset",
            "id": frame.id,
            "topic": frame.topic,
            "subscription": frame.subscription,
            "execute": frame.execute,
        }
        if isinstance(frame, SubReset):
            a["to"] = str(frame.to) if isinstance(frame.to, From) else frame.to
        return _packb(a)
    if isinstance(frame, Presence):
        return _packb({"op": "presence", "id": frame.id, "topic": frame.topic})
    if isinstance(frame, Stats):
        return _packb(statscodec.request_map(frame))
    if isinstance(frame, SlotMove):
        return _packb({"op": "slotmove", "id": frame.id, "slot": frame.slot, "to": frame.to})
    raise TypeError(f"not a client frame: {frame!r}")


def enc_broker(frame: BrokerFrame) -> bytes:
    """Encode a broker frame."""
    match frame:
        case Deliver(sid=sid, topic=topic, records=records, era=era):
            return enc_deliver(sid, topic, records, era)
        case PubAck(id=id, ts=ts, group=group, eras=eras):
            return enc_puback(id, ts, group, eras)
        case SubOk(sid=sid, next=next_ts, era=era):
            return enc_subok(sid, next_ts, era)
        case Fetched(id=id, records=records, next=next_ts, published=published, purged=purged):
            return enc_fetched(id, records, next_ts, published, purged)
        case Committed(id=id, ts=ts, head=head):
            return enc_committed(id, ts, head)
        case MetaReply():
            return enc_meta(frame)
        case Error():
            return _packb(_error_map(frame))
        case SubInfo():
            return enc_subinfo(frame)
        case Members():
            return _packb(members_map(frame))
        case Join() | Leave():
            return _packb(event_map(frame))
        case StatsReply():
            return _packb(statscodec.reply_map(frame))
        case SlotInfo():
            return enc_slotinfo(frame)
    raise TypeError(f"not a broker frame: {frame!r}")
