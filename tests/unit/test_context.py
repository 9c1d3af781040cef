"""The local context (tritonmq/context.py): where it lives, and what wins over it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonmq import Client
from tritonmq.context import context_path, remove_context, write_context
from tritonmq.coord.zkclient import ENV_AUTH, ENV_AUTH_FILE, FROM_ENV, ZkCredential
from tritonmq.errors import ConfigError


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No cluster named by the environment; the context at ``tmp_path/context.json``."""
    for k in ("TRITONMQ_URL", "TRITONMQ_ZK", ENV_AUTH, ENV_AUTH_FILE):
        monkeypatch.delenv(k, raising=False)
    path = tmp_path / "context.json"
    monkeypatch.setenv("TRITONMQ_CONTEXT", str(path))
    return path


def dev_context(path: Path, pid: int | None = None) -> Path:
    auth = path.with_name("zk.auth")
    auth.write_text("tritonmq:secret\n")
    state = {"zk": "127.0.0.1:4350", "chroot": "/tritonmq", "zk_auth_file": str(auth),
             "brokers": [{"url": "ws://127.0.0.1:4351"}]}  # fmt: skip
    write_context(path, state, os.getpid() if pid is None else pid)
    return path


def test_where_the_context_lives() -> None:
    assert context_path({"TRITONMQ_CONTEXT": "/x/c.json"}) == Path("/x/c.json")
    assert context_path({"XDG_STATE_HOME": "/s"}) == Path("/s/tritonmq/context.json")
    home = Path.home() / ".local" / "state" / "tritonmq" / "context.json"
    assert context_path({}) == home
    assert context_path({"XDG_STATE_HOME": "relative"}) == home  # the spec: ignored


def test_no_url_and_no_context_is_a_config_error_that_says_what_to_do(env: Path) -> None:
    with pytest.raises(ConfigError) as e:
        Client()
    assert "tritonmq dev" in str(e.value) and str(env) in str(e.value)


def test_the_context_names_the_cluster_and_its_credential(env: Path) -> None:
    dev_context(env)
    c = Client()
    assert c.url == "zk://127.0.0.1:4350/tritonmq"
    assert c._zk_auth == ZkCredential("tritonmq", "secret")
    same = Client("zk://127.0.0.1:4350")  # given, and the context's: its credential too
    assert same._zk_auth == ZkCredential("tritonmq", "secret")
    other = Client("zk://127.0.0.1:9999")
    assert other._zk_auth is FROM_ENV


def test_an_argument_then_the_environment_win_over_the_context(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev_context(env)
    monkeypatch.setenv("TRITONMQ_URL", "ws://127.0.0.1:7001")
    assert Client().url == "ws://127.0.0.1:7001"
    assert Client("zk://10.0.0.1:2181").url == "zk://10.0.0.1:2181"
    monkeypatch.delenv("TRITONMQ_URL")
    monkeypatch.setenv(ENV_AUTH_FILE, str(env.with_name("zk.auth")))
    assert Client()._zk_auth is FROM_ENV  # the environment's credential


def test_a_context_whose_dev_is_gone_is_named(env: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    dev_context(env, int(ended.stdout))
    with pytest.raises(ConfigError, match="no longer running"):
        Client()
    assert Client("zk://127.0.0.1:4350").url  # a given URL does not need it


def test_a_file_that_is_not_a_context_is_named(env: Path) -> None:
    env.write_text("[]")
    with pytest.raises(ConfigError, match="not a tritonmq context file"):
        Client()


def test_only_the_dev_that_wrote_the_context_removes_it(env: Path) -> None:
    dev_context(env)
    remove_context(env, os.getpid() + 1)
    assert json.loads(env.read_text())["pid"] == os.getpid()
    remove_context(env, os.getpid())
    assert not env.exists()
