"""The ``stats`` op (admin, read-only) on the wire: its request and its answer as maps.

Kept apart from :mod:`tritonmq.wire.codec` (which calls it for ``op == "stats"``) so that
module stays under the size limit; both subprotocols go through these functions, as
for every other op. Topics and subscriptions travel as arrays of maps: an operator's
tool reads them by name, and they are answered once per request, not per record.
"""

from __future__ import annotations

from typing import Any

from tritonmq.errors import MalformedFrame
from tritonmq.wire.fields import MAX_SAFE_INT, int_field, opt_int
from tritonmq.wire.frames import STATS_MAX_ITEMS, Stats, StatsReply, SubStats, TopicStats

MAX_NAME_LEN = 249


def _str(obj: dict[str, Any], key: str, default: str | None = None) -> str:
    v = obj.get(key)
    if v is None:
        v = default
    if not isinstance(v, str) or len(v) > MAX_NAME_LEN:
        raise MalformedFrame(f"'{key}' must be a string of at most {MAX_NAME_LEN} characters")
    return v


def _rate(obj: dict[str, Any], key: str) -> float:
    v = obj.get(key, 0.0)
    if type(v) not in (int, float) or not 0 <= v <= MAX_SAFE_INT:
        raise MalformedFrame(f"'{key}' must be a number >= 0")
    return float(v)


def _items(obj: dict[str, Any], key: str) -> tuple[dict[str, Any], ...]:
    raw = obj.get(key, ())
    if raw is None:
        return ()
    if type(raw) is not tuple or len(raw) > STATS_MAX_ITEMS:
        raise MalformedFrame(f"'{key}' must be an array of at most {STATS_MAX_ITEMS} maps")
    if not all(isinstance(m, dict) for m in raw):
        raise MalformedFrame(f"'{key}' must be an array of maps")
    return raw


def decode_request(obj: dict[str, Any]) -> Stats:
    """``{"op": "stats", "id": N, "topic": optional}``."""
    topic = obj.get("topic")
    if topic is not None and (not isinstance(topic, str) or not 0 < len(topic) <= MAX_NAME_LEN):
        raise MalformedFrame(f"'topic' must be a non-empty string of at most {MAX_NAME_LEN}")
    return Stats(int_field(obj, "id"), topic or "")


def request_map(frame: Stats) -> dict[str, Any]:
    out: dict[str, Any] = {"op": "stats", "id": frame.id}
    if frame.topic:
        out["topic"] = frame.topic
    return out


def _topic(m: dict[str, Any]) -> TopicStats:
    return TopicStats(
        _str(m, "topic"),
        int_field(m, "records", default=0),
        int_field(m, "bytes", default=0),
        int_field(m, "first_ts", default=0),
        int_field(m, "last_ts", default=0),
        opt_int(m, "last_ms"),
        _rate(m, "rate"),
        int_field(m, "consumers", default=0),
    )


def _sub(m: dict[str, Any]) -> SubStats:
    mode = m.get("mode")
    if mode not in ("broadcast", "shared"):
        raise MalformedFrame("a subscription's 'mode' must be 'broadcast' or 'shared'")
    return SubStats(
        _str(m, "topic"),
        _str(m, "subscription"),
        mode,
        int_field(m, "offset"),
        opt_int(m, "stored"),
        int_field(m, "lag", default=0),
        opt_int(m, "lag_ms"),
        int_field(m, "consumers", default=0),
    )


def decode_reply(obj: dict[str, Any]) -> StatsReply:
    role = obj.get("role")
    if role not in ("primary", "backup"):
        raise MalformedFrame("'role' must be 'primary' or 'backup'")
    return StatsReply(
        int_field(obj, "id"),
        _str(obj, "group", ""),
        _str(obj, "broker", ""),
        role,
        int_field(obj, "epoch", default=0),
        int_field(obj, "commit", default=0),
        int_field(obj, "records", default=0),
        int_field(obj, "bytes", default=0),
        int_field(obj, "max_bytes", default=0),
        _rate(obj, "rate"),
        int_field(obj, "wall_ms", default=0),
        tuple(_topic(m) for m in _items(obj, "topics")),
        tuple(_sub(m) for m in _items(obj, "subscriptions")),
        int_field(obj, "more_topics", default=0),
        int_field(obj, "more_subscriptions", default=0),
    )


def reply_map(r: StatsReply) -> dict[str, Any]:
    return {
        "op": "stats",
        "id": r.id,
        "group": r.group,
        "broker": r.broker,
        "role": r.role,
        "epoch": r.epoch,
        "commit": r.commit,
        "records": r.records,
        "bytes": r.bytes,
        "max_bytes": r.max_bytes,
        "rate": r.rate,
        "wall_ms": r.wall_ms,
        "topics": [
            {
                "topic": t.topic,
                "records": t.records,
                "bytes": t.bytes,
                "first_ts": t.first_ts,
                "last_ts": t.last_ts,
                "last_ms": t.last_ms,
                "rate": t.rate,
                "consumers": t.consumers,
            }
            for t in r.topics
        ],
        "subscriptions": [
            {
                "topic": s.topic,
                "subscription": s.subscription,
                "mode": s.mode,
                "offset": s.offset,
                "stored": s.stored,
                "lag": s.lag,
                "lag_ms": s.lag_ms,
                "consumers": s.consumers,
            }
            for s in r.subscriptions
        ],
        "more_topics": r.more_topics,
        "more_subscriptions": r.more_subscriptions,
    }
