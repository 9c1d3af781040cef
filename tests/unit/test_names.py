"""One topic-name rule (tritonmq/wire/names.py), the same as the JS client's: the shared
vectors of clients/vectors/topic_names.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritonmq.core.limits import Caps, check_names
from tritonmq.errors import ConfigError, InvalidName
from tritonmq.wire.frames import ErrorCode, From, Pub, Sub
from tritonmq.wire.names import check_topic, topic_problem

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "clients" / "vectors" / "topic_names.json").read_text()
)


def expand(name: str) -> str:
    """``x-249``: 249 x's (JSON would spell them out)."""
    if name.startswith("x-") and name[2:].isdigit():
        return "x" * int(name[2:])
    return name


@pytest.mark.parametrize("name", VECTORS["valid"])
def test_valid_names_pass(name: str) -> None:
    assert topic_problem(expand(name)) is None
    check_topic(expand(name))


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=lambda c: repr(c["name"]))
def test_invalid_names_are_refused_naming_the_rule(case: dict[str, str]) -> None:
    name = expand(case["name"])
    problem = topic_problem(name)
    assert problem is not None and case["rule"] in problem, problem
    with pytest.raises(InvalidName, match="topic name") as caught:
        check_topic(name)
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, ValueError)


def test_a_pattern_is_refused_saying_patterns_are_not_supported() -> None:
    problem = topic_problem("chat.*")
    assert problem is not None and "pattern" in problem


def test_the_broker_refuses_a_pattern_with_bad_request() -> None:
    caps = Caps(10, 10, 249)
    refused = check_names("c", Sub(3, "chat.>", None, From.LATEST), caps)
    assert refused is not None and refused.code == ErrorCode.BAD_REQUEST
    assert "'>'" in refused.message and refused.sid == 3
    pub = check_names("c", Pub(7, "chat.*", []), caps)
    assert pub is not None and pub.code == ErrorCode.BAD_REQUEST and pub.id == 7
