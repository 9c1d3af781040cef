"""`tritonmq subscriptions delete|reset` (admin ops) and `tritonmq token` (dev tokens).

The delete and reset commands are registered under `tritonmq subscriptions` by
:mod:`tritonmq.cli_ops`, and under their old hidden name `tritonmq subscription` here by
:func:`add_commands`. Like Kafka's
``kafka-consumer-groups``, delete and reset print what would change and change nothing
unless ``--execute`` is given. Bad input exits with status 2; a broker's refusal
(``FORBIDDEN``, a subscription with connected consumers...) with status 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import click

from tritonmq.cli_context import URL_HELP, ZK_HELP, Unreachable, topic_callback
from tritonmq.errors import ClientClosed, ConfigError, TritonError
from tritonmq.tokens import TOKEN_ENV, read_token_file

F = TypeVar("F", bound=Callable[..., Any])


ca_file_option = click.option(
    "--ca-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    envvar="TRITONMQ_CA_FILE",
    help="PEM CA that wss:// brokers' certificates must chain to (default: the system's).",
)


def token_option(f: F) -> F:
    """``--token-file``: a file holding the client's token (else ``$TRITONMQ_TOKEN``)."""
    return click.option(
        "--token-file",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"File holding a token to present (default: ${TOKEN_ENV}, if set).",
    )(f)


def read_token(token_file: str | None) -> str | None:
    """The token from ``token_file`` or ``$TRITONMQ_TOKEN``; None: anonymous."""
    if token_file is not None:
        try:
            return read_token_file(token_file)
        except ConfigError as e:
            raise click.UsageError(f"--token-file: {e}") from e
    return os.environ.get(TOKEN_ENV) or None


def _target(url: str | None, zk_hosts: str | None, chroot: str | None) -> str:
    from tritonmq.cli_context import resolve_url

    return resolve_url(url, zk_hosts, chroot)


def _run(
    url: str | None,
    zk_hosts: str | None,
    chroot: str | None,
    ca_file: str | None,
    token_file: str | None,
    op: Callable[[Any], Coroutine[Any, Any, Any]],
) -> Any:
    import asyncio

    from tritonmq.client import Client

    target, token = _target(url, zk_hosts, chroot), read_token(token_file)

    async def run() -> Any:
        options: dict[str, Any] = {"timeout": 10.0, "connect_timeout": 10.0, "token": token}
        async with Client(target, ca_file=ca_file, **options) as c:
            return await op(c)

    try:
        return asyncio.run(run())
    except ClientClosed as e:
        raise Unreachable(str(e)) from None
    except TritonError as e:
        click.echo(f"error: {e.code}: {e}", err=True)
        sys.exit(1)


def _describe(info: Any) -> str:
    owner = info.owner or "anonymous"
    return (
        f"subscription {info.subscription!r} of topic {info.topic!r} "
        f"(mode {info.mode}, owner {owner}, offset {info.offset}, "
        f"{info.consumers} connected consumer(s))"
    )


def _report(info: Any, done: str, todo: str, change: str) -> None:
    if info.executed:
        click.echo(f"{done} {_describe(info)}{change}")
        return
    click.echo(f"DRY RUN: would {todo} {_describe(info)}{change}")
    if info.consumers:
        click.echo("(refused while consumers are connected: stop them first)")
    click.echo("nothing changed; run again with --execute to do it")


_connection = [
    click.option("--url", default=None, help=URL_HELP),
    click.option("--zk", "zk_hosts", default=None, metavar="HOST:PORT", help=ZK_HELP),
    click.option(
        "--chroot", default=None, help="ZooKeeper path of the cluster (default /tritonmq)."
    ),
    ca_file_option,
    token_option,
    click.option("--execute", is_flag=True, help="Do it (without: a dry run)."),
]


def _with_connection(f: F) -> F:
    for option in reversed(_connection):
        f = option(f)
    return f


@click.group("subscription", hidden=True)
def subscription() -> None:
    """The old name of `tritonmq subscriptions delete|reset` (kept for scripts)."""


@subscription.command("delete")
@click.argument("topic", callback=topic_callback)
@click.argument("name")
@_with_connection
def delete(
    topic: str,
    name: str,
    url: str | None,
    zk_hosts: str | None,
    chroot: str | None,
    ca_file: str | None,
    token_file: str | None,
    execute: bool,
) -> None:
    """Delete subscription NAME of TOPIC and its offset (a dry run unless --execute)."""
    info = _run(
        url,
        zk_hosts,
        chroot,
        ca_file,
        token_file,
        lambda c: c.delete_subscription(topic, name, execute=execute),
    )
    _report(info, "deleted", "delete", "")


def _reset_target(value: str) -> str | int:
    from tritonmq.opsview import parse_reset_target

    try:
        return parse_reset_target(value)
    except ValueError as e:
        raise click.UsageError(str(e)) from None


@subscription.command("reset")
@click.argument("topic", callback=topic_callback)
@click.argument("name")
@click.option("--to", "to", required=True, help="earliest, latest or a ts (the next record).")
@_with_connection
def reset(
    topic: str,
    name: str,
    to: str,
    url: str | None,
    zk_hosts: str | None,
    chroot: str | None,
    ca_file: str | None,
    token_file: str | None,
    execute: bool,
) -> None:
    """Move subscription NAME of TOPIC to --to (a dry run unless --execute)."""
    target = _reset_target(to)
    info = _run(
        url,
        zk_hosts,
        chroot,
        ca_file,
        token_file,
        lambda c: c.reset_subscription(topic, name, target, execute=execute),
    )
    _report(info, "reset", "reset", f" to offset {info.to} (next record: ts > {info.to})")


@click.command("token")
@click.option(
    "--key-file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The HS256 shared secret the brokers verify with (auth_key_file).",
)
@click.option("--sub", "principal", required=True, help="The principal the token names.")
@click.option("--pub", multiple=True, help="Topic pattern it may publish to (repeatable).")
@click.option("--read", multiple=True, help="Topic pattern it may read (repeatable).")
@click.option("--names", multiple=True, help="Subscription-name pattern (repeatable).")
@click.option(
    "--admin",
    is_flag=True,
    help="May delete and reset subscriptions, move slots and read the brokers' stats.",
)
@click.option(
    "--ttl",
    type=click.FloatRange(min=0, min_open=True),
    default=3600.0,
    show_default=True,
    help="Seconds until it expires.",
)
def token(
    key_file: str,
    principal: str,
    pub: tuple[str, ...],
    read: tuple[str, ...],
    names: tuple[str, ...],
    admin: bool,
    ttl: float,
) -> None:
    """Print a development token (HS256) signed with --key-file."""
    from tritonmq.tokens import mint, read_key

    try:
        key = read_key(key_file)
    except ConfigError as e:
        raise click.UsageError(str(e)) from e
    if not key:
        raise click.UsageError(f"--key-file {key_file} is empty")
    click.echo(mint(key, principal, pub=pub, read=read, names=names, admin=admin, ttl=ttl))


def add_commands(main: click.Group) -> None:
    main.add_command(subscription)
    main.add_command(token)
