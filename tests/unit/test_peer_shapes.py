"""`tritonmq bench --against` (tritonmq/devtools/peers): the argument, the shared load shapes
against an in-memory system (what each shape asks of a system, and its bounds), and the
report; no servers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest
from rich.console import Console

from tritonmq.devtools.peers import parse_against
from tritonmq.devtools.peers.run import PeersReport, report_table
from tritonmq.devtools.peers.shapes import QUICK, SHAPES, Sizes, measure, pct, quick, rows


@pytest.mark.parametrize(
    ("text", "want"),
    [("nats,redis", ["nats", "redis"]), ("redis, NATS", ["nats", "redis"]), ("redis", ["redis"])],
)
def test_peers_are_named_and_shown_in_table_order(text: str, want: list[str]) -> None:
    assert parse_against(text) == want


@pytest.mark.parametrize(
    ("text", "says"), [("kafka", "one of nats, redis"), ("", "one of"), ("nats,nats", "once")]
)
def test_unknown_or_repeated_peers_are_refused(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_against(text)


def test_percentiles_by_nearest_rank() -> None:
    data = [float(i) for i in range(1, 1001)]
    assert (pct(data, 50), pct(data, 99), pct(data, 99.9)) == (500.0, 990.0, 999.0)
    assert pct([3.0], 99.9) == 3.0
    assert pct([], 50) != pct([], 50)  # nan


def test_quick_is_one_short_round_of_the_same_record_size() -> None:
    q = quick(Sizes(size=200))
    assert (q.size, q.rounds, q.seconds) == (200, 1, 1.0)
    assert q.records < Sizes().records and q.publishers == Sizes().publishers


class FakeConn:
    """Confirms after a loop turn, delivers to every subscriber of the topic; tracks the
    most records unconfirmed at once and the most concurrent single publishes."""

    def __init__(self, world: FakeWorld) -> None:
        self.w = world

    async def create(self, topic: str) -> None:
        self.w.topics.add(topic)

    async def drop(self, topic: str) -> None:
        self.w.topics.discard(topic)
        self.w.dropped.append(topic)

    async def _send(self, topic: str, n: int) -> None:
        assert topic in self.w.topics, f"{topic} used before create"
        self.w.unconfirmed += n
        self.w.most_unconfirmed = max(self.w.most_unconfirmed, self.w.unconfirmed)
        await asyncio.sleep(0)
        for on_records in self.w.subs.get(topic, []):
            on_records(n)
        self.w.unconfirmed -= n
        self.w.published += n

    async def publish(self, topic: str, value: bytes) -> None:
        assert len(value) == self.w.size
        await self._send(topic, 1)

    async def publish_batch(self, topic: str, values: list[bytes]) -> None:
        assert len(values) <= 100
        await self._send(topic, len(values))

    async def subscribe(
        self,
        topic: str,
        on_records: Callable[[int], None],
        on_error: Callable[[BaseException], None],
    ) -> Callable[[], Awaitable[None]]:
        self.w.subs.setdefault(topic, []).append(on_records)

        async def stop() -> None:
            self.w.subs[topic].remove(on_records)

        return stop

    async def close(self) -> None:
        self.w.closed += 1


class FakeWorld:
    key = "fake"
    title = "Fake"

    def __init__(self, size: int) -> None:
        self.size = size
        self.topics: set[str] = set()
        self.dropped: list[str] = []
        self.subs: dict[str, list[Callable[[int], None]]] = {}
        self.unconfirmed = 0
        self.most_unconfirmed = 0
        self.published = 0
        self.connected = 0
        self.closed = 0

    def missing(self) -> list[str]:
        return []

    def start(self) -> None: ...

    def stop(self) -> None: ...

    async def connect(self) -> FakeConn:
        self.connected += 1
        return FakeConn(self)

    def describe(self) -> str:
        return "fake"


def test_every_shape_runs_on_the_primitives_alone_within_its_bounds() -> None:
    s = replace(QUICK, seconds=0.2)
    world = FakeWorld(s.size)
    phases: list[str] = []
    out = asyncio.run(measure(world, s, 1, phases.append))
    assert set(out) == {key for key, _label in rows(s)}
    assert all(v > 0 for v in out.values()), out
    assert out["single_p50_ms"] <= out["single_p99_ms"] <= out["single_p999_ms"]
    assert [p.rsplit(": ", 1)[1] for p in phases] == list(SHAPES)
    # batches of 100 with at most 5,000 unconfirmed; 256 single publishers at once at most
    assert world.most_unconfirmed <= max(s.unconfirmed, s.publishers)
    # each shape's topics dropped; every subscriber stopped; every connection closed
    assert not world.topics and world.dropped and not any(world.subs.values())
    assert world.connected == world.closed == 2 + 1 + s.subscribers


def test_table_has_a_row_per_measure_a_column_per_system_and_ratios() -> None:
    s = Sizes(rounds=2)
    report = PeersReport(s)
    for key, title in (("tritonmq", "TritonMQ 1x3"), ("nats", "NATS JetStream R3")):
        report.systems[key] = {"title": title, "setup": ""}
    keys = [k for k, _ in rows(s)]
    for rnd, factor in ((1, 1.0), (2, 3.0)):
        report.runs.append(
            {"system": "tritonmq", "round": rnd, "results": dict.fromkeys(keys, 4.0 * factor)}
        )
        report.runs.append(
            {"system": "nats", "round": rnd, "results": dict.fromkeys(keys, 1.0 * factor)}
        )
    assert report.median("tritonmq")["batches_msgs_per_s"] == 8.0  # median of 4 and 12
    assert report.ratios("nats")["e2e_msgs_per_s"] == 4.0
    console = Console(width=200, record=True)
    console.print(report_table(report))
    text = console.export_text()
    assert "TritonMQ 1x3" in text and "NATS JetStream R3" in text and "TritonMQ / NATS" in text
    for _key, label in rows(s):
        [line] = [ln for ln in text.splitlines() if label in ln]
        assert line.rstrip(" │").endswith("4.00")
    assert report.as_dict()["ratio_tritonmq_over"]["nats"]["single_p99_ms"] == 4.0
