"""The topic-name rule, one for the broker, the Python client, the CLI and the JS client
(clients/js/tritonmq.js ``topicProblem``; shared vectors in clients/vectors/topic_names.json;
docs/protocol.md §3, "Topic names").

A topic or subscription name is 1..``max_name_len`` (at most 249) characters, is not ``.``
or ``..`` and holds no ``/`` (it becomes one ZooKeeper path segment) and no control
character (U+0000-U+001F, U+007F-U+009F). A topic name also holds no ``*`` or ``>``: those
are what a subscriber types for a pattern (``chat.*``, ``chat.>`` in NATS), and TritonMQ has
no pattern subscriptions, so such a name is refused instead of naming a topic literally.
Any other character is allowed (spaces and any script's letters too).
"""

from __future__ import annotations

import re
from typing import Final

from tritonmq.errors import InvalidName

MAX_NAME_LEN: Final = 249  # the wire's own bound on a name (wire/codec.py)
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_PATTERN: Final = re.compile(r"[*>]")


def name_problem(kind: str, name: str, max_len: int = MAX_NAME_LEN) -> str | None:
    """Why ``name`` cannot be a ``kind`` ("topic", "subscription") name, or None."""
    if not isinstance(name, str):
        return f"a {kind} name must be a string, not {type(name).__name__}"
    if not name:
        return f"a {kind} name must not be empty"
    if len(name) > max_len:
        return f"a {kind} name has at most max_name_len={max_len} characters, not {len(name)}"
    if name in (".", ".."):
        return f"{name!r} is not a valid {kind} name ('.' and '..' are reserved)"
    if "/" in name:
        return f"a {kind} name must not contain '/': {name[:60]!r}"
    bad = _CONTROL.search(name)
    if bad is not None:
        return f"a {kind} name must not contain control characters (U+{ord(bad.group()):04X})"
    if kind == "topic":
        wild = _PATTERN.search(name)
        if wild is not None:
            return (
                f"a topic name must not contain {wild.group()!r}: {name[:60]!r} looks like a "
                "pattern, and subscribing by pattern is not supported (subscribe to each "
                "topic; `tritonmq topics` lists them)"
            )
    return None


def topic_problem(name: str, max_len: int = MAX_NAME_LEN) -> str | None:
    """Why ``name`` cannot be a topic name, or None."""
    return name_problem("topic", name, max_len)


def check_topic(name: str) -> str:
    """``name`` if it is a valid topic name, else :class:`InvalidName` saying why."""
    problem = topic_problem(name)
    if problem is not None:
        raise InvalidName(problem)
    return name
