"""Which cluster a command talks to when it is not told: flags, environment, local context.

First to last: the command's flag (``--url``, ``--zk``), the environment (``$TRITONMQ_URL``,
``$TRITONMQ_ZK``), the local context `tritonmq dev` writes (tritonmq/context.py), then
``127.0.0.1:2181``. When the cluster is the context's, its ZooKeeper credential is used
unless ``$TRITONMQ_ZK_AUTH_FILE`` (or ``$TRITONMQ_ZK_AUTH``) names one; its CA unless
``--ca-file`` (or ``$TRITONMQ_CA_FILE``) does (``Client`` sees to that).
"""

from __future__ import annotations

import os
from typing import Any

import click

from tritonmq.context import ENV_URL, ENV_ZK, LocalContext, load_context
from tritonmq.errors import ConfigError, TritonError

DEFAULT_ZK = "127.0.0.1:2181"
ZK_HELP = f"ZooKeeper HOST:PORT[,...] (default: ${ENV_ZK}, the local context, {DEFAULT_ZK})."
URL_HELP = (
    f"zk://HOST:PORT[/chroot] or ws(s)://HOST:PORT of any broker (default: ${ENV_URL}, "
    f"else --zk, ${ENV_ZK}, the local context, zk://{DEFAULT_ZK})."
)


class Unreachable(click.ClickException):
    """The cluster cannot be read or reached: exit status 2, like a bad argument."""

    exit_code = 2


def check_zk(zk_hosts: str) -> str:
    """``zk_hosts`` if ZooKeeper answers there (a quick probe, tritonmq/coord/probe.py);
    else :class:`Unreachable` with one line: "cannot reach ZooKeeper at HOST:PORT: why"."""
    from tritonmq.coord.probe import probe_zk

    try:
        probe_zk(zk_hosts)
    except TritonError as e:
        raise Unreachable(str(e)) from None
    return zk_hosts


def _context() -> LocalContext | None:
    try:
        return load_context()
    except ConfigError as e:
        raise click.UsageError(str(e)) from None


def _use_credential(ctx: LocalContext) -> None:
    """This process's ZooKeeper clients read the context's credential, unless the
    environment names one (it always wins)."""
    from tritonmq.coord.zkclient import ENV_AUTH, ENV_AUTH_FILE

    if not os.environ.get(ENV_AUTH_FILE) and not os.environ.get(ENV_AUTH):
        os.environ[ENV_AUTH_FILE] = ctx.zk_auth_file


def resolve_zk(zk_hosts: str | None) -> str:
    """The ZooKeeper connect string to use (see the module docstring), once it answers
    (:func:`check_zk`)."""
    return check_zk(_resolve_zk(zk_hosts))


def _resolve_zk(zk_hosts: str | None) -> str:
    given = zk_hosts or os.environ.get(ENV_ZK) or None
    ctx = _context()
    if given is not None:
        if ctx is not None and ctx.names_zk(given) and ctx.alive:
            _use_credential(ctx)
        return given
    if ctx is None:
        return DEFAULT_ZK
    try:
        ctx.check_alive()
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    _use_credential(ctx)
    return ctx.zk


def resolve_url(url: str | None, zk_hosts: str | None, chroot: str | None = None) -> str:
    """The client URL to use: ``--url``, else ``--zk`` (with ``--chroot``), else
    ``$TRITONMQ_URL``, else ZooKeeper as :func:`resolve_zk` finds it."""
    if url and (zk_hosts or chroot):
        raise click.UsageError("give --url, or --zk (and --chroot), not both")
    if not url and not zk_hosts and not chroot:
        url = os.environ.get(ENV_URL) or None
    if url:
        if url.startswith("zk://"):  # ZooKeeper must answer; ws:// goes to a broker direct
            check_zk(url[len("zk://") :].split("/", 1)[0])
        return url
    return f"zk://{resolve_zk(zk_hosts)}{chroot or ''}"


def topic_callback(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    """For TOPIC arguments: a name outside the topic-name rule (tritonmq/wire/names.py; a
    pattern such as ``chat.*`` included) is bad input, exit status 2."""
    from tritonmq.wire.names import topic_problem

    problem = None if value is None else topic_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="TOPIC")
    return value


def zk_callback(_ctx: click.Context, _param: click.Parameter, value: Any) -> str:
    """For ``--zk`` options (default None): the connect string :func:`resolve_zk` finds."""
    return resolve_zk(value)


zk_option = click.option(
    "--zk", "zk_hosts", default=None, callback=zk_callback, metavar="HOST:PORT", help=ZK_HELP
)
