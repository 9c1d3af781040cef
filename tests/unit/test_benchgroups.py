"""`tritonmq bench --groups` (tritonmq/devtools/benchgroups.py): the argument, how the
load is spread over slots and producers, and the report's shape; no cluster."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from rich.console import Console

from tritonmq.cli import main
from tritonmq.core.slots import slot_of
from tritonmq.devtools.benchgroups import (
    GroupsReport,
    GroupsRun,
    parse_groups,
    report_table,
    shares,
    spread_topics,
)


@pytest.mark.parametrize(("text", "want"), [("1,2,3", [1, 2, 3]), ("2", [2]), (" 3, 1", [3, 1])])
def test_group_counts(text: str, want: list[int]) -> None:
    assert parse_groups(text) == want


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "separated by commas"),
        ("1,,2", "separated by commas"),
        ("1,x", "separated by commas"),
        ("-1", "separated by commas"),
        ("0,1", "1..8, not 0"),
        ("1,9", "1..8, not 9"),
        ("1,2,1", "once"),
    ],
)
def test_a_bad_group_count_says_what_is_allowed(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_groups(text)


@pytest.mark.parametrize(
    "args",
    [["--groups", "1,x"], ["--groups", "0"], ["--groups", "1,2", "--zk", "127.0.0.1:2181"]],
)
def test_bench_with_a_bad_groups_argument_exits_2_before_starting_anything(
    args: list[str],
) -> None:
    r = CliRunner().invoke(main, ["bench", *args])
    assert r.exit_code == 2 and "--groups" in r.output, r.output


def test_topics_are_spread_over_every_slot() -> None:
    names = spread_topics(130, 64)
    assert len(set(names)) == 130
    assert [slot_of(t, 64) for t in names] == [i % 64 for i in range(130)]


def test_every_record_is_dealt_once_to_some_producer() -> None:
    topics = spread_topics(64)
    work = shares(1000, topics, 3)
    assert sum(k for w in work for _, k in w) == 1000
    assert sorted(t for w in work for t, _ in w) == sorted(topics)
    assert {k for w in work for _, k in w} == {15, 16}  # 1000 = 64 x 15 + 40
    assert [len(w) for w in work] == [22, 21, 21]
    few = shares(10, topics, 4)  # fewer records than topics: no empty batches
    assert sum(k for w in few for _, k in w) == 10 and all(k == 1 for w in few for _, k in w)


def test_the_report_has_the_load_and_one_run_per_group_count() -> None:
    report = GroupsReport(600, 100, 64, 4)
    report.runs += [
        GroupsRun(1, 3, 600, 0.5, 1200.0, {"g1": 64}),
        GroupsRun(2, 6, 600, 0.4, 1500.0, {"g1": 32, "g2": 32}),
    ]
    out = report.as_dict({"cpus": 2})
    assert {k: out[k] for k in ("records", "size", "topics", "producers", "replicas")} == {
        "records": 600,
        "size": 100,
        "topics": 64,
        "producers": 4,
        "replicas": 3,
    }
    assert out["cpus"] == 2
    assert [(r["groups"], r["brokers"], r["acked"]) for r in out["runs"]] == [
        (1, 3, 600),
        (2, 6, 600),
    ]
    assert set(out["runs"][0]) == {
        "groups",
        "brokers",
        "acked",
        "seconds",
        "msgs_per_s",
        "topics_per_group",
    }
    console = Console(width=200, record=True)
    console.print(report_table(report))
    text = console.export_text()
    assert "1,500" in text and "1.25x" in text
