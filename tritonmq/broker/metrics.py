"""Prometheus metrics of one broker (``GET /metrics``; docs/operations.md, "Metrics and health").

Two kinds, so that the hot path pays almost nothing:

* counters and histograms move where the shell handles the core's events and performs
  its actions (:meth:`BrokerMetrics.event_in`, :meth:`~BrokerMetrics.handled` and the
  calls in ``Broker.perform``), once per frame, never per record. They are plain ints
  and bucket lists (the event loop is the only writer), turned into metric families
  only when Prometheus scrapes: prometheus_client's own Counter and Histogram take a
  lock per call, ~10x the cost;
* gauges (role, epoch, ISR, retained records, lag, connections) are read from the
  core's state when Prometheus scrapes (:class:`StateCollector`), so keeping them costs
  nothing between scrapes.

Every broker has its own :class:`~prometheus_client.CollectorRegistry` (no global
registry: tests run several brokers in one process). Names follow Prometheus'
conventions (``tritonmq_`` prefix, base units, ``_total`` on counters) and Kafka's
vocabulary where one exists (ISR, under-replicated, under-min-ISR, shrinks/expands).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from tritonmq.config import BrokerConfig
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import (
    ClientFrameIn,
    ClientGone,
    Event,
    FollowerFrame,
    LinkEnd,
    LinkEvent,
    PrimaryFrame,
)
from tritonmq.core.health import readiness, subscription_lags
from tritonmq.core.roles import Role
from tritonmq.wire.frames import Append, ErrorCode, Pub, Record

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
PAUSE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
# Events that cannot change the role or the ISR: skipped by :meth:`BrokerMetrics.handled`.
_HOT = (ClientFrameIn, ClientGone, FollowerFrame, PrimaryFrame)


class Buckets:
    """A histogram kept as plain numbers: ``observe`` is a bisect and two additions (a
    prometheus_client Histogram takes a lock and costs ~10x more per call)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v

    def family(self, name: str, doc: str, group: str) -> HistogramMetricFamily:
        h = HistogramMetricFamily(name, doc, labels=["group"])
        cumulative, total = [], 0
        for bound, n in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts, strict=True):
            total += n
            cumulative.append((bound, total))
        h.add_metric([group], cumulative, self.sum)
        return h


# (attribute, metric name without _total, help) of the counters BrokerMetrics keeps
COUNTERS = (
    (
        "published",
        "tritonmq_published_records",
        "Records acknowledged to producers by this broker as primary (a retry of records"
        " already held is acknowledged, and counted, again).",
    ),
    ("delivered", "tritonmq_delivered_records", "Records sent to subscribers (redeliveries too)."),
    ("delivered_bytes", "tritonmq_delivered_bytes", "Bytes of deliver frames sent to subscribers."),
    (
        "isr_shrinks",
        "tritonmq_isr_shrinks",
        "ISR changes this broker wrote as primary that removed a replica (its own election"
        " leaving the old primary out included).",
    ),
    (
        "isr_expands",
        "tritonmq_isr_expands",
        "ISR changes this broker wrote as primary that added a caught-up replica.",
    ),
    ("elections", "tritonmq_leader_elections", "Times this broker became the group's primary."),
    (
        "replicated",
        "tritonmq_replicated_entries",
        "Log entries received from primaries as a backup (catch-up included): a restart"
        " from segment files copies only what it lacks.",
    ),
    (
        "failovers",
        "tritonmq_failovers",
        "Elections of this broker that took over from another primary (crash or planned stop).",
    ),
)
# (attribute, metric name, help) of its histograms
HISTOGRAMS = (
    (
        "ack_latency",
        "tritonmq_publish_ack_seconds",
        "From a pub frame's arrival to its acknowledgement (replicated to the ISR).",
    ),
    (
        "delivery_latency",
        "tritonmq_publish_to_delivery_seconds",
        "From a record's publish time (wall clock, ms) to its delivery, per deliver frame"
        " (its oldest record).",
    ),
    (
        "failover_pause",
        "tritonmq_failover_pause_seconds",
        "On a new primary: from the first sign the old primary was gone (or its last frame)"
        " to accepting writes itself: the time the group could acknowledge no publish.",
    ),
)


class BrokerMetrics:
    """The broker's registry; counters and histograms as plain numbers, moved by the shell
    and turned into metric families when Prometheus scrapes."""

    def __init__(
        self,
        cfg: BrokerConfig,
        core: Callable[[], BrokerCore | None],
        connections: Callable[[], tuple[int, int]],
    ) -> None:
        self.cfg = cfg
        self.core = core
        self.published = 0
        self.delivered = 0
        self.delivered_bytes = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.elections = 0
        self.replicated = 0
        self.failovers = 0
        self.refused = dict.fromkeys(ErrorCode, 0)
        self.ack_latency = Buckets(LATENCY_BUCKETS)
        self.delivery_latency = Buckets(LATENCY_BUCKETS)
        self.failover_pause = Buckets(PAUSE_BUCKETS)
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self.registry.register(StateCollector(cfg, core, connections))
        self._pubs: dict[int, dict[int, float]] = {}  # id(conn) -> pub id -> arrival
        self._heard_primary: float | None = None  # last frame from the primary (monotonic)
        self._trouble: float | None = None  # first sign since then that the primary is gone
        self._leading = False
        self._isr: frozenset[str] | None = None
        self._primary: str | None = None  # the primary of the last state seen

    def collect(self) -> Iterator[Metric]:
        g = self.cfg.group
        for attr, name, doc in COUNTERS:
            c = CounterMetricFamily(name, doc, labels=["group"])
            c.add_metric([g], getattr(self, attr))
            yield c
        refused = CounterMetricFamily(
            "tritonmq_requests_refused",
            "Client requests answered with an error frame, by error code.",
            labels=["group", "code"],
        )
        for code, n in self.refused.items():
            refused.add_metric([g, code.name], n)
        yield refused
        for attr, name, doc in HISTOGRAMS:
            yield getattr(self, attr).family(name, doc, g)

    # --- events (Broker.feed) -------------------------------------------------------

    def event_in(self, ev: Event) -> None:
        """Before the core handles ``ev``: note what the actions it causes are timed from."""
        t = type(ev)
        if t is ClientFrameIn:
            frame = ev.frame  # type: ignore[union-attr]
            if type(frame) is Pub:
                conn = id(ev.conn)  # type: ignore[union-attr]
                pubs = self._pubs.get(conn)
                if pubs is None:
                    pubs = self._pubs[conn] = {}
                pubs[frame.id] = ev.now
        elif t is PrimaryFrame:
            self._heard_primary = ev.now
            self._trouble = None
            frame = ev.frame  # type: ignore[union-attr]
            if type(frame) is Append:
                self.replicated += len(frame.entries)
        elif t is LinkEvent and self._trouble is None and ev.what is not LinkEnd.CONNECTED:  # type: ignore[union-attr]
            self._trouble = ev.now
        elif t is ClientGone:
            self._pubs.pop(id(ev.conn), None)  # type: ignore[union-attr]

    def handled(self, ev: Event) -> None:
        """After ``ev`` was handled: count elections, failovers and ISR changes."""
        if isinstance(ev, _HOT):
            return
        core = self.core()
        if core is None:
            return
        now: float = ev.now
        st = core.state
        leading = core.primary is not None and core.role is Role.LEADING
        if leading and not self._leading:
            self.elections += 1
            if self._primary is not None and self._primary != core.me.id:
                self.failovers += 1
                self.failover_pause.observe(max(0.0, now - self._pause_start(now)))
            self._heard_primary = self._trouble = None
        elif not leading and self._trouble is None and st is not None:
            if not st.in_sync(core.members.get(st.primary)):  # ZooKeeper shows it gone
                self._trouble = now
        isr = frozenset(st.isr) if st is not None else None
        if leading and isr is not None and self._isr is not None and isr != self._isr:
            if self._isr - isr:
                self.isr_shrinks += 1
            if isr - self._isr:
                self.isr_expands += 1
        self._leading = leading
        self._isr = isr
        self._primary = st.primary if st is not None else None

    def _pause_start(self, now: float) -> float:
        """When the group stopped taking writes, as far as this broker can tell: the first
        sign that the primary was gone (its link closed, refused or timed out, or ZooKeeper
        showed it gone), or its last frame if frames came until a session timeout before
        that sign (a busy primary that froze: the frames stopping is the better start)."""
        sign = self._trouble if self._trouble is not None else now
        heard = self._heard_primary
        if heard is not None and sign - heard <= self.cfg.session_timeout:
            return heard
        return sign

    # --- actions (Broker.perform) -----------------------------------------------------

    def acked(self, conn: Any, pub_id: int, records: int) -> None:
        self.published += records
        pubs = self._pubs.get(id(conn))
        if pubs is not None:
            start = pubs.pop(pub_id, None)
            if start is not None:
                self.ack_latency.observe(time.monotonic() - start)

    def refused_request(self, code: ErrorCode, conn: Any, req_id: int | None) -> None:
        self.refused[code] += 1
        if req_id is not None:
            pubs = self._pubs.get(id(conn))
            if pubs is not None:
                pubs.pop(req_id, None)

    def delivered_frame(self, records: list[Record], size: int, published_ms: int | None) -> None:
        self.delivered += len(records)
        self.delivered_bytes += size
        if published_ms is not None:
            self.delivery_latency.observe(max(0.0, time.time() - published_ms / 1000))

    # --- exposition -------------------------------------------------------------------

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The registry in the format ``accept`` asks for (Prometheus text by default)."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type


ROLES = tuple(Role)


class StateCollector:
    """Gauges read from the core's state at scrape time (on the event loop, like every
    other reader of the core)."""

    def __init__(
        self,
        cfg: BrokerConfig,
        core: Callable[[], BrokerCore | None],
        connections: Callable[[], tuple[int, int]],
    ) -> None:
        self.cfg = cfg
        self.core = core
        self.connections = connections

    def collect(self) -> Iterator[Metric]:
        cfg, g = self.cfg, self.cfg.group
        open_, refused = self.connections()
        yield _gauge("tritonmq_client_connections", "Client connections open.", g, open_)
        c = CounterMetricFamily(
            "tritonmq_connections_refused",
            "Client handshakes refused at max_connections (HTTP 503).",
            labels=["group"],
        )
        c.add_metric([g], refused)
        yield c
        core = self.core()
        if core is None:
            return
        info = GaugeMetricFamily(
            "tritonmq_broker_info",
            "This broker: id, group, boot id.",
            labels=["group", "broker", "boot"],
        )
        info.add_metric([g, core.me.id, core.me.boot], 1)
        yield info
        role = GaugeMetricFamily(
            "tritonmq_role", "1 for the role this broker is in.", labels=["group", "role"]
        )
        for r in ROLES:
            role.add_metric([g, r.value], 1 if core.role is r else 0)
        yield role
        p = core.primary
        st = core.state
        yield _gauge("tritonmq_is_primary", "1 on the group's primary.", g, p is not None)
        ready = readiness(core)
        yield _gauge("tritonmq_ready", "1 when GET /readyz answers 200.", g, ready.ready)
        yield _gauge(
            "tritonmq_epoch", "The group's epoch (leader epoch) as this broker sees it.", g,
            st.epoch if st else 0,
        )  # fmt: skip
        isr = len(st.isr) if st else 0
        yield _gauge(
            "tritonmq_insync_replicas", "Replicas in the group's ISR (ZooKeeper's).", g, isr
        )
        yield _gauge("tritonmq_replicas", "Configured replicas of the group.", g, cfg.replicas)
        yield _gauge(
            "tritonmq_min_insync_replicas",
            "ISR size below which the group refuses writes (NOT_ENOUGH_REPLICAS).",
            g,
            cfg.effective_min_insync,
        )
        yield _gauge(
            "tritonmq_under_replicated",
            "1 when the ISR is smaller than replicas (reported by the primary only).",
            g,
            p is not None and isr < cfg.replicas,
        )
        yield _gauge(
            "tritonmq_under_min_isr",
            "1 when the ISR is below min_insync: writes are refused (primary only).",
            g,
            p is not None and len(p.isr) < p.min_insync,
        )
        log = core.log
        files = bool(cfg.data_dir)
        yield _gauge(
            "tritonmq_log_written_ts",
            "The log's end this broker's segment files hold (0: memory only).", g,
            log.last_ts if files else 0,
        )  # fmt: skip
        yield _gauge(
            "tritonmq_log_synced_ts",
            "How far this broker's segment files are fsynced (0: memory only).", g,
            core.synced_ts,
        )  # fmt: skip
        if p is not None:
            yield _gauge(
                "tritonmq_group_synced_ts",
                "Primary: every in-sync replica's files are fsynced up to here (synced acks).",
                g, p.synced_point() if files else 0,
            )  # fmt: skip
        yield _gauge("tritonmq_retained_records", "Records held in memory.", g, log.records)
        yield _gauge("tritonmq_retained_bytes", "Memory the retained records cost.", g, log.bytes)
        yield _gauge(
            "tritonmq_max_bytes", "max_bytes: retained bytes past it refuse writes (FULL).", g,
            cfg.max_bytes,
        )  # fmt: skip
        yield _gauge(
            "tritonmq_topics", "Topics holding records or subscribers.", g, len(log.topics)
        )
        yield _gauge("tritonmq_log_end_ts", "ts of the last record appended.", g, log.last_ts)
        yield _gauge(
            "tritonmq_commit_ts", "ts up to which records are committed.", g, core.commit_ts
        )
        yield _gauge(
            "tritonmq_consumers", "Subscriptions attached on this broker (connection, sid).", g,
            len(core.delivery.consumers),
        )  # fmt: skip
        lag = GaugeMetricFamily(
            "tritonmq_replica_lag_records",
            "On the primary: log entries each follower has not acknowledged.",
            labels=["group", "replica"],
        )
        if p is not None:
            for fid, f in p.followers.items():
                lag.add_metric([g, fid], max(0, log.last_ts - f.acked))
        yield lag
        records = GaugeMetricFamily(
            "tritonmq_subscription_lag_records",
            "Committed records a durable subscription has not acknowledged (primary only).",
            labels=["group", "topic", "subscription"],
        )
        seconds = GaugeMetricFamily(
            "tritonmq_subscription_lag_seconds",
            "Age of the oldest record a durable subscription has not acknowledged.",
            labels=["group", "topic", "subscription"],
        )
        for s in subscription_lags(core, time.time_ns() // 1_000_000):
            records.add_metric([g, s.topic, s.subscription], s.records)
            seconds.add_metric([g, s.topic, s.subscription], s.seconds)
        yield records
        yield seconds


def _gauge(name: str, doc: str, group: str, value: float) -> GaugeMetricFamily:
    m = GaugeMetricFamily(name, doc, labels=["group"])
    m.add_metric([group], float(value))
    return m
