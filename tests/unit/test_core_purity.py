"""`tritonmq.core` is pure: nothing in it may import I/O, clocks, threads or randomness."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

import tritonmq.core

CORE = Path(tritonmq.core.__file__).parent
BANNED = frozenset(
    {"asyncio", "socket", "kazoo", "websockets", "time", "random", "uvloop", "threading"}
)
CORE_FILES = sorted(CORE.rglob("*.py"))


def banned_imports(source: str, filename: str) -> list[str]:
    """``module (line n)`` for every import of a banned top-level module in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        found += [f"{m} (line {node.lineno})" for m in modules if m.split(".")[0] in BANNED]
    return found


def test_core_has_modules_to_check() -> None:
    names = {p.name for p in CORE_FILES}
    assert {"log.py", "replication.py", "delivery.py", "group.py", "actions.py"} <= names


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_nothing_impure(path: Path) -> None:
    assert banned_imports(path.read_text(), str(path)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import time",
        "import asyncio.events",
        "import os, socket",
        "from random import choice",
        "from kazoo.client import KazooClient",
        "def f():\n    import threading",
        "if True:\n    from uvloop import new_event_loop",
        "import websockets as ws",
    ],
)
def test_the_check_catches_every_import_form(source: str) -> None:
    assert banned_imports(source, "<test>") != []


@pytest.mark.parametrize(
    "source", ["import timeit", "from .time import x", "import heapq", "from bisect import bisect"]
)
def test_the_check_allows_lookalikes_and_relative_imports(source: str) -> None:
    assert banned_imports(source, "<test>") == []


def test_ruff_bans_the_same_modules_in_core() -> None:
    config = tomllib.loads((CORE / "ruff.toml").read_text())
    banned = config["lint"]["flake8-tidy-imports"]["banned-api"]
    assert set(banned) == BANNED
