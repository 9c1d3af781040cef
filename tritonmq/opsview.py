"""What the operator CLI shows (``tritonmq topics``, ``subscriptions``, ``top``), built
from a :class:`Snapshot` of the cluster: pure functions, no I/O.

Where each number comes from: ZooKeeper for what is durable and shared (the slot map,
each group's epoch, primary and ISR, the durable subscriptions with their stored
offsets and owners); each group primary's ``stats`` answer for what only it knows now
(records and bytes retained, publish rates, connected consumers, offsets in memory and
lag). A group whose primary did not answer still shows what ZooKeeper holds, with its
live figures empty (``None`` in JSON).

Rows are plain dicts with stable keys: the ``--json`` output is exactly these rows.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tritonmq.client.routing import ClusterView
from tritonmq.core.slots import slot_of
from tritonmq.wire.frames import StatsReply, SubStats


@dataclass
class Snapshot:
    """One read of the cluster: ``cluster`` as :func:`tritonmq.coord.inspect.read_cluster`
    returns it, ``subscriptions`` as :func:`~tritonmq.coord.inspect.read_subscriptions`
    does, and per group its primary's ``stats`` (absent: it did not answer, why in
    ``unanswered``)."""

    cluster: dict[str, Any]
    subscriptions: list[dict[str, Any]]
    stats: dict[str, StatsReply] = field(default_factory=dict)
    unanswered: dict[str, str] = field(default_factory=dict)
    taken_at: float = field(default_factory=time.time)

    @property
    def groups(self) -> dict[str, dict[str, Any]]:
        groups: dict[str, dict[str, Any]] = self.cluster.get("groups") or {}
        return groups

    @functools.cached_property
    def _view(self) -> ClusterView:
        return ClusterView.from_info(self.cluster)  # once per snapshot, not per topic

    def group_of(self, topic: str) -> str | None:
        if not self.groups:
            return None
        return self._view.group_of(topic) or None

    def slot_of(self, topic: str) -> int | None:
        slots = self.cluster.get("slots")
        return slot_of(topic, int(slots["slots"])) if slots else None


def parse_reset_target(value: str) -> str | int:
    """``--to``: ``earliest``, ``latest`` or a ts (the first record handed out next)."""
    v = value.strip()
    if v in ("earliest", "latest"):
        return v
    if v.isascii() and v.isdigit():
        return int(v)
    raise ValueError(f"--to must be earliest, latest or a ts (an integer >= 0), not {value!r}")


def topic_rows(snap: Snapshot, only: str | None = None) -> list[dict[str, Any]]:
    """One row per topic a primary holds or that has a durable subscription; sorted by
    group, then topic."""
    found: dict[str, str | None] = {}
    for g, reply in snap.stats.items():
        for t in reply.topics:
            found.setdefault(t.topic, g)
    durable: dict[str, int] = {}
    for s in snap.subscriptions:
        durable[s["topic"]] = durable.get(s["topic"], 0) + 1
        found.setdefault(s["topic"], snap.group_of(s["topic"]))
    if only is not None:
        found = {only: found.get(only, snap.group_of(only))}
    by_topic = defaultdict(dict, {g: {t.topic: t for t in r.topics} for g, r in snap.stats.items()})
    rows = []
    for topic, reported_by in found.items():
        group = snap.group_of(topic) or reported_by
        st = snap.stats.get(group or "")
        ts = by_topic[group or ""].get(topic)
        live = st is not None
        rows.append(
            {
                "topic": topic,
                "group": group,
                "slot": snap.slot_of(topic),
                "records": (ts.records if ts else 0) if live else None,
                "bytes": (ts.bytes if ts else 0) if live else None,
                "first_ts": (ts.first_ts if ts else 0) if live else None,
                "last_ts": (ts.last_ts if ts else 0) if live else None,
                "last_publish_ms": ts.last_ms if ts else None,
                "rate": (ts.rate if ts else 0.0) if live else None,
                "consumers": (ts.consumers if ts else 0) if live else None,
                "subscriptions": durable.get(topic, 0),
            }
        )
    rows.sort(key=lambda r: (r["group"] or "", r["topic"]))
    return rows


def slot_figures(snap: Snapshot) -> dict[int, dict[str, Any]]:
    """Per slot of the map, the sum over its topics (:func:`topic_rows`) of retained
    records and bytes and publish rate, and how many topics: what a rebalance weighs.
    ``None`` figures: the slot's group's primary did not answer."""
    slots = snap.cluster.get("slots")
    if not slots:
        return {}
    out: dict[int, dict[str, Any]] = {}
    for n, group in enumerate(slots["owners"]):
        live = group in snap.stats
        out[n] = {
            "topics": 0 if live else None,
            "records": 0 if live else None,
            "bytes": 0 if live else None,
            "rate": 0.0 if live else None,
        }
    for r in topic_rows(snap):
        f = out.get(r["slot"])
        if f is None or f["records"] is None or r["records"] is None:
            continue
        f["topics"] += 1
        f["records"] += r["records"]
        f["bytes"] += r["bytes"]
        f["rate"] += r["rate"]
    return out


def subscription_rows(snap: Snapshot, only: str | None = None) -> list[dict[str, Any]]:
    """One row per durable subscription (ZooKeeper's, and any a primary holds that is
    still registering); sorted by topic, then name."""
    live: dict[tuple[str, str], tuple[str, SubStats]] = {}
    for g, reply in snap.stats.items():
        for got_s in reply.subscriptions:
            live[(got_s.topic, got_s.subscription)] = (g, got_s)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for z in snap.subscriptions:
        key = (z["topic"], z["name"])
        rows[key] = {
            "topic": z["topic"],
            "name": z["name"],
            "mode": z["mode"],
            "owner": z.get("owner"),
            "group": snap.group_of(z["topic"]),
            "offset": z["offset"],
            "stored": z["offset"],
        }
    for key, (g, held) in live.items():
        rows.setdefault(
            key,
            {
                "topic": held.topic,
                "name": held.subscription,
                "mode": held.mode,
                "owner": None,
                "group": g,
                "offset": held.offset,
                "stored": held.stored,
            },
        )
    out = []
    for key, row in rows.items():
        if only is not None and key[0] != only:
            continue
        st = snap.stats.get(row["group"] or "")
        got = live.get(key)
        s = got[1] if got else None
        if s is not None:
            row["offset"] = s.offset
            row["mode"] = s.mode
        row["head"] = st.commit if st else None
        row["lag"] = s.lag if s else (0 if st else None)
        if s is not None:
            row["lag_s"] = None if s.lag_ms is None else round(s.lag_ms / 1000, 3)
        else:
            row["lag_s"] = 0.0 if st else None
        row["consumers"] = s.consumers if s else (0 if st else None)
        out.append(row)
    out.sort(key=lambda r: (r["topic"], r["name"]))
    return out


def group_rows(snap: Snapshot, failovers: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """One row per group: ZooKeeper's state and its primary's figures."""
    rows = []
    for g, info in sorted(snap.groups.items()):
        st = snap.stats.get(g)
        lags = [s.lag for s in st.subscriptions] if st else []
        ages = [s.lag_ms for s in st.subscriptions if s.lag_ms] if st else []
        members = sorted(info.get("members") or {})
        rows.append(
            {
                "group": g,
                "epoch": info.get("epoch"),
                "primary": info.get("primary"),
                "primary_url": info.get("primary_url"),
                "isr": list(info.get("isr") or []),
                "members": members,
                "under_replicated": len(info.get("isr") or []) < len(members),
                "records": st.records if st else None,
                "bytes": st.bytes if st else None,
                "max_bytes": st.max_bytes if st else None,
                "commit": st.commit if st else None,
                "rate": st.rate if st else None,
                "max_lag": max(lags, default=0) if st else None,
                "max_lag_s": round(max(ages, default=0) / 1000, 3) if st else None,
                "failovers_seen": (failovers or {}).get(g, 0),
                "answered": st is not None,
                "error": snap.unanswered.get(g),
            }
        )
    return rows


# --- formatting for tables ------------------------------------------------------------


def fmt_bytes(n: int | None) -> str:
    """1536 -> "1.5 KiB"; None (not known) -> "-"."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def fmt_rate(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r:,.0f}/s" if r >= 100 else f"{r:.1f}/s"


def fmt_seconds(s: float | None) -> str:
    """How long something has waited: "0", "850ms", "12.3s", "4m05s", "2h03m"."""
    if s is None:
        return "-"
    if s <= 0:
        return "0"
    if s < 1:
        return f"{s * 1000:.0f}ms"
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def fmt(v: Any) -> str:
    """A cell: "-" for unknown, the value otherwise."""
    return "-" if v is None else str(v)


def fmt_age(ms: int | None, now: float) -> str:
    """Time since a wall-clock ms, as :func:`fmt_seconds` ("-": never or not known)."""
    if ms is None:
        return "-"
    return fmt_seconds(max(0.0, now - ms / 1000))
