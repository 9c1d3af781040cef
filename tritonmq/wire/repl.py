"""msgpack codec for ``tritonmq.repl.v1``, the broker-to-broker replication subprotocol.

Split from :mod:`tritonmq.wire.codec` (which keeps ``tritonmq.v1``) along the
subprotocol seam; the field checks and limits are shared from there. A decoder
raises only :class:`~tritonmq.errors.ProtocolError` subclasses; ``append``
takes already-stamped entries so nothing is converted record by record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tritonmq.errors import MalformedFrame, UnknownOp
from tritonmq.wire.codec import MAX_NAME_LEN, MAX_PROOF_LEN, _packb, _unpack
from tritonmq.wire.fields import bin_field, int_field, published_pairs, str_field, ts_ok
from tritonmq.wire.frames import (
    Append,
    Challenge,
    DedupPage,
    Entry,
    Follow,
    HandoverAsk,
    HandoverPairs,
    Leader,
    Purge,
    ReplAck,
    ReplFrame,
    SharedAck,
    SharedState,
    SharedSub,
    TsRanges,
)


def _topic_points(raw: Any, name: str) -> tuple[tuple[str, int], ...]:
    """An array of ``[topic, ts]`` (a purge's points, a follower's purged records)."""
    if not isinstance(raw, tuple) or not all(
        type(t) is tuple and len(t) == 2 and type(t[0]) is str and type(t[1]) is int for t in raw
    ):
        raise MalformedFrame(f"'{name}' must be an array of [topic, ts]")
    return tuple((t, u) for t, u in raw)


def _epochs(raw: Any) -> list[tuple[int, int]]:
    if not isinstance(raw, tuple):
        raise MalformedFrame("'epochs' must be an array of [epoch, start_ts]")
    out = []
    for e in raw:
        if type(e) is not tuple or len(e) != 2 or not all(type(x) is int for x in e):
            raise MalformedFrame("'epochs' must be an array of [epoch, start_ts]")
        out.append((e[0], e[1]))
    return out


def _pairs(raw: Any) -> tuple[tuple[int, bytes], ...]:
    if not isinstance(raw, tuple) or not all(
        type(d) is tuple and len(d) == 2 and type(d[0]) is int and type(d[1]) is bytes for d in raw
    ):
        raise MalformedFrame("'pairs' must be an array of [ts, uuid]")
    return raw


def _earlier(raw: Any) -> tuple[tuple[int, tuple[tuple[int, bytes], ...]], ...]:
    if not isinstance(raw, tuple) or not all(
        type(e) is tuple and len(e) == 2 and type(e[0]) is int and e[0] >= 0 for e in raw
    ):
        raise MalformedFrame("'earlier' must be an array of [era, pairs]")
    return tuple((era, _pairs(pairs)) for era, pairs in raw)


def _opt_after(obj: Any) -> int | None:
    return None if obj.get("after") is None else int_field(obj, "after")


def _opt_cursor(raw: Any) -> tuple[int, int] | None:
    """An ask's ``earlier``: absent, or [era, ts]."""
    if raw is None:
        return None
    if type(raw) is not tuple or len(raw) != 2 or not all(ts_ok(v) for v in raw):
        raise MalformedFrame("'earlier' must be [era, ts]")
    return raw[0], raw[1]


def _dedup(raw: Any) -> tuple[tuple[int, bytes, int], ...]:
    if not isinstance(raw, tuple) or not all(
        type(d) is tuple
        and len(d) == 3
        and type(d[0]) is int
        and type(d[1]) is bytes
        and type(d[2]) is int
        for d in raw
    ):
        raise MalformedFrame("'dedup' must be an array of [ts, uuid, slot]")
    return raw


def _entry_ok(e: Any) -> bool:
    if type(e) is not tuple or len(e) != 2 or type(e[0]) is not str:
        return False
    rec = e[1]
    if type(rec) is not tuple or len(rec) != 5:
        return False
    ts, u, k, v, h = rec
    return (
        type(ts) is int
        and type(u) is bytes
        and (k is None or type(k) is bytes)
        and type(v) is bytes
        and (h is None or type(h) is dict)
    )


def decode_repl(data: bytes | str, *, max_frame: int = 64 * 1024 * 1024) -> ReplFrame:
    """Decode a broker-to-broker frame. Entries are trusted in shape once the frame checks out."""
    obj = _unpack(data, max_frame)
    op = obj["op"]
    if op == "append":
        entries = obj.get("entries")
        if not isinstance(entries, tuple):
            raise MalformedFrame("'entries' must be an array")
        for e in entries:
            if e is not None and not _entry_ok(e):
                raise MalformedFrame("an entry is nil or [topic, [ts, uuid, key, value, headers]]")
        return Append(
            int_field(obj, "epoch"),
            int_field(obj, "commit"),
            int_field(obj, "start"),
            list(entries),
            published_pairs(obj),
            obj.get("sync") is True,
        )
    if op == "purge":
        topics = _topic_points(obj.get("topics"), "topics")
        return Purge(int_field(obj, "epoch"), list(topics), int_field(obj, "forget"))
    if op == "rack":
        synced = int_field(obj, "synced", default=0)
        return ReplAck(int_field(obj, "epoch"), int_field(obj, "ts"), synced)
    if op == "shared":
        subs = obj.get("subs")
        if not isinstance(subs, tuple):
            raise MalformedFrame("'subs' must be an array")
        seq = int_field(obj, "seq", default=0)
        return SharedState(int_field(obj, "epoch"), tuple(_shared_sub(s) for s in subs), seq)
    if op == "sack":
        return SharedAck(int_field(obj, "epoch"), int_field(obj, "seq"))
    if op == "follow":
        return Follow(
            str_field(obj, "group", max_len=MAX_NAME_LEN),
            str_field(obj, "id", max_len=MAX_NAME_LEN),
            str_field(obj, "boot", max_len=MAX_NAME_LEN),
            int_field(obj, "epoch"),
            int_field(obj, "last_ts"),
            _epochs(obj.get("epochs")),
            bin_field(obj, "proof", max_len=MAX_PROOF_LEN, optional=True),
            _topic_points(obj.get("purged", ()), "purged"),
        )
    if op == "challenge":
        nonce = bin_field(obj, "nonce", max_len=MAX_PROOF_LEN)
        if not nonce:
            raise MalformedFrame("'nonce' must not be empty")
        return Challenge(nonce)
    if op == "leader":
        return Leader(
            int_field(obj, "epoch"),
            int_field(obj, "truncate_to"),
            _epochs(obj.get("epochs")),
            obj.get("reset") is True,
            _dedup(obj.get("dedup", ())),
            _topic_points(obj.get("purged", ()), "purged"),
            obj.get("more") is True,
        )
    if op == "dedup":
        return DedupPage(int_field(obj, "epoch"), _dedup(obj.get("dedup")), obj.get("more") is True)
    if op == "handover":
        return HandoverAsk(
            str_field(obj, "group", max_len=MAX_NAME_LEN),
            str_field(obj, "id", max_len=MAX_NAME_LEN),
            str_field(obj, "boot", max_len=MAX_NAME_LEN),
            int_field(obj, "slot"),
            int_field(obj, "until"),
            bin_field(obj, "proof", max_len=MAX_PROOF_LEN, optional=True),
            _opt_after(obj),
            _opt_cursor(obj.get("earlier")),
        )
    if op == "handed":
        return HandoverPairs(
            int_field(obj, "slot"),
            int_field(obj, "until"),
            _pairs(obj.get("pairs")),
            _opt_after(obj),
            obj.get("more") is True,
            _earlier(obj.get("earlier", ())),
        )
    raise UnknownOp(f"unknown replication op {op[:40]!r}")


def _ranges(raw: Any) -> TsRanges:
    if not isinstance(raw, tuple) or not all(
        type(r) is tuple and len(r) == 2 and type(r[0]) is int and type(r[1]) is int for r in raw
    ):
        raise MalformedFrame("ts ranges must be an array of [first, last]")
    return raw


def _shared_sub(raw: Any) -> SharedSub:
    if type(raw) is not tuple or len(raw) not in (8, 9):
        raise MalformedFrame("a shared subscription is [topic, name, offset, cursor, held, ...]")
    topic, name, offset, cursor, held, free, ahead, members, *rest = raw
    era = rest[0] if rest else 0
    if not (
        type(topic) is str
        and type(name) is str
        and type(offset) is int
        and type(cursor) is int
        and type(era) is int
        and era >= 0
        and type(held) is tuple
        and all(type(h) is tuple and len(h) == 2 and type(h[0]) is str for h in held)
        and type(members) is tuple
        and all(type(m) is str for m in members)
    ):
        raise MalformedFrame("a shared subscription is [topic, name, offset, cursor, held, ...]")
    return SharedSub(
        topic,
        name,
        offset,
        cursor,
        tuple((m, _ranges(r)) for m, r in held),
        _ranges(free),
        _ranges(ahead),
        members,
        era,
    )


# --- encoders ---------------------------------------------------------------


def enc_append(
    epoch: int,
    commit: int,
    start: int,
    entries: Sequence[Entry | None],
    published: Sequence[tuple[int, int]] = (),
    sync: bool = False,
) -> bytes:
    frame: dict[str, Any] = {
        "op": "append",
        "epoch": epoch,
        "commit": commit,
        "start": start,
        "entries": entries,
    }
    if published:
        frame["published"] = published
    if sync:
        frame["sync"] = True
    return _packb(frame)


def enc_purge(p: Purge) -> bytes:
    return _packb({"op": "purge", "epoch": p.epoch, "topics": p.topics, "forget": p.forget})


def enc_shared(st: SharedState) -> bytes:
    subs = [
        (s.topic, s.name, s.offset, s.cursor, s.held, s.free, s.ahead, s.members)
        + ((s.era,) if s.era else ())  # as before moves existed, unless of a moved slot's era
        for s in st.subs
    ]
    return _packb({"op": "shared", "epoch": st.epoch, "seq": st.seq, "subs": subs})


def enc_rack(epoch: int, ts: int, synced: int = 0) -> bytes:
    if synced:
        return _packb({"op": "rack", "epoch": epoch, "ts": ts, "synced": synced})
    return _packb({"op": "rack", "epoch": epoch, "ts": ts})


def enc_sack(a: SharedAck) -> bytes:
    return _packb({"op": "sack", "epoch": a.epoch, "seq": a.seq})


def enc_follow(f: Follow) -> bytes:
    return _packb(
        {
            "op": "follow",
            "group": f.group,
            "id": f.id,
            "boot": f.boot,
            "epoch": f.epoch,
            "last_ts": f.last_ts,
            "epochs": f.epochs,
            **({"proof": f.proof} if f.proof else {}),
            **({"purged": f.purged} if f.purged else {}),
        }
    )


def enc_challenge(c: Challenge) -> bytes:
    return _packb({"op": "challenge", "nonce": c.nonce})


def enc_leader(lead: Leader) -> bytes:
    frame: dict[str, Any] = {
        "op": "leader",
        "epoch": lead.epoch,
        "truncate_to": lead.truncate_to,
        "epochs": lead.epochs,
        "reset": lead.reset,
    }
    if lead.dedup:
        frame["dedup"] = lead.dedup
    if lead.purged:
        frame["purged"] = lead.purged
    if lead.more:
        frame["more"] = True
    return _packb(frame)


def enc_dedup(page: DedupPage) -> bytes:
    frame: dict[str, Any] = {"op": "dedup", "epoch": page.epoch, "dedup": page.dedup}
    if page.more:
        frame["more"] = True
    return _packb(frame)


def enc_handover_ask(a: HandoverAsk) -> bytes:
    return _packb(
        {
            "op": "handover",
            "group": a.group,
            "id": a.id,
            "boot": a.boot,
            "slot": a.slot,
            "until": a.until,
            **({"proof": a.proof} if a.proof else {}),
            **({"after": a.after} if a.after is not None else {}),
            **({"earlier": a.earlier} if a.earlier is not None else {}),
        }
    )


def enc_handover_pairs(h: HandoverPairs) -> bytes:
    frame: dict[str, Any] = {"op": "handed", "slot": h.slot, "until": h.until, "pairs": h.pairs}
    if h.after is not None:
        frame["after"] = h.after
    if h.more:
        frame["more"] = True
    if h.earlier:
        frame["earlier"] = h.earlier
    return _packb(frame)
