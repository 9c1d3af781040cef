"""Options of the Spark source and sink, parsed and checked once, with Kafka's names where
they mean the same thing. Pure: no Spark needed (unit-tested without it)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from tritonmq.errors import ConfigError


def _url(opts: Mapping[str, str]) -> str:
    """``zk`` or ``url``; with neither, ``$TRITONMQ_URL`` or the local context's cluster (the
    one `tritonmq dev` runs, tritonmq/context.py)."""
    from tritonmq.context import client_url

    url = opts.get("url")
    zk = opts.get("zk")
    if url and zk:
        raise ConfigError("give either option 'zk' (host:port) or 'url', not both")
    if zk:
        url = zk if zk.startswith("zk://") else f"zk://{zk}"
    if not url:
        try:
            url = client_url(None)
        except ConfigError as e:
            raise ConfigError(
                f"option 'zk' (ZooKeeper host:port[/chroot]) or 'url' is required: {e}"
            ) from None
    if urlparse(url).scheme not in ("zk", "ws", "wss"):
        raise ConfigError(f"option 'url' must be zk://, ws:// or wss://, not {url!r}")
    return url


def _ca_file(opts: Mapping[str, str]) -> str | None:
    """``caFile``: the PEM CA wss:// brokers are verified with, at the same path on every
    executor (default: the system's trust store)."""
    ca = opts.get("caFile")
    if ca is not None and not ca.strip():
        raise ConfigError("option 'caFile' must name a PEM file")
    return ca


def _zk_auth_file(opts: Mapping[str, str], url: str) -> str | None:
    """``zkAuthFile``: the file holding the cluster's ZooKeeper credential (``user:password``),
    at the same path on every executor, for zk:// URLs. Default: ``$TRITONMQ_ZK_AUTH_FILE``,
    else the local context's when ``url`` is its cluster (the one `tritonmq dev` runs)."""
    from tritonmq.context import context_for
    from tritonmq.coord.zkclient import ENV_AUTH_FILE

    path = opts.get("zkAuthFile")
    if path is not None:
        if not path.strip():
            raise ConfigError("option 'zkAuthFile' must name a file holding user:password")
        return path
    if os.environ.get(ENV_AUTH_FILE):
        return os.environ[ENV_AUTH_FILE]
    ctx = context_for(url) if url.startswith("zk://") else None
    return ctx.zk_auth_file if ctx is not None else None


def _token_file(opts: Mapping[str, str]) -> str | None:
    """``tokenFile``: a file holding the token to present (brokers with ``auth_required``), at
    the same path on every executor; read when a process first connects."""
    path = opts.get("tokenFile")
    if path is not None and not path.strip():
        raise ConfigError("option 'tokenFile' must name a file holding a token")
    return path


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    v = opts.get(key)
    if v is None:
        return default
    if str(v).lower() in ("true", "1", "yes"):
        return True
    if str(v).lower() in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {key!r} must be true or false, not {v!r}")


def _positive(opts: Mapping[str, str], key: str) -> int | None:
    v = opts.get(key)
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        raise ConfigError(f"option {key!r} must be a positive integer, not {v!r}") from None
    if n < 1:
        raise ConfigError(f"option {key!r} must be a positive integer, not {v!r}")
    return n


def _position(opts: Mapping[str, str], key: str, default: str) -> str | dict[str, int]:
    raw = opts.get(key, default)
    if raw in ("earliest", "latest"):
        return raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(
        isinstance(g, str) and type(ts) is int and ts >= 0 for g, ts in parsed.items()
    ):
        raise ConfigError(
            f"option {key!r} must be 'earliest', 'latest' or JSON of group -> ts"
            f' (e.g. {{"g1": 1200}}), not {raw!r}'
        )
    return parsed


@dataclass(frozen=True, slots=True)
class SourceOptions:
    url: str
    topics: tuple[str, ...]
    pattern: str | None
    starting: str | dict[str, int]
    starting_timestamp: int | None
    ending: str | dict[str, int]
    max_records: int | None
    fail_on_data_loss: bool
    include_headers: bool
    subscription: str | None
    min_partitions: int
    fetch_max: int
    ca_file: str | None = None
    token_file: str | None = None
    zk_auth_file: str | None = None

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


def source_options(opts: Mapping[str, str], *, batch: bool = False) -> SourceOptions:
    """Check a source's options; every mistake is a :class:`ConfigError` that says what to do.

    A streaming query starts at ``latest`` by default, a batch read at ``earliest``."""
    topics_raw = opts.get("topics") or opts.get("subscribe")
    pattern = opts.get("topicPattern") or opts.get("subscribePattern")
    if bool(topics_raw) == bool(pattern):
        raise ConfigError(
            "give exactly one of options 'topics' (comma separated) or 'topicPattern'"
        )
    topics = tuple(t.strip() for t in (topics_raw or "").split(",") if t.strip())
    if topics_raw and not topics:
        raise ConfigError("option 'topics' names no topic")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError(f"option 'topicPattern' is not a regular expression: {e}") from None
    if "startingPosition" in opts and "startingTimestamp" in opts:
        raise ConfigError("give either 'startingPosition' or 'startingTimestamp', not both")
    ts_raw = opts.get("startingTimestamp")
    starting_ts = None
    if ts_raw is not None:
        try:
            starting_ts = int(ts_raw)
        except ValueError:
            raise ConfigError(
                f"option 'startingTimestamp' must be wall-clock milliseconds, not {ts_raw!r}"
            ) from None
    sub = opts.get("subscription")
    if sub is not None and not 0 < len(sub) <= 249:
        raise ConfigError("option 'subscription' must be 1..249 characters")
    url = _url(opts)
    return SourceOptions(
        url=url,
        topics=topics,
        pattern=pattern,
        starting=_position(opts, "startingPosition", "earliest" if batch else "latest"),
        starting_timestamp=starting_ts,
        ending=_position(opts, "endingPosition", "latest"),
        max_records=_positive(opts, "maxRecordsPerTrigger"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        subscription=sub,
        min_partitions=_positive(opts, "minPartitions") or 2,
        fetch_max=_positive(opts, "fetchMaxRecords") or 10_000,
        ca_file=_ca_file(opts),
        token_file=_token_file(opts),
        zk_auth_file=_zk_auth_file(opts, url),
    )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    url: str
    topic: str | None
    sink_id: str | None
    ca_file: str | None = None
    token_file: str | None = None
    zk_auth_file: str | None = None
    durability: str = ""  # when a row's record is acknowledged ("": the broker's default)


def sink_options(opts: Mapping[str, str]) -> SinkOptions:
    topic = opts.get("topic")
    if topic is not None and not 0 < len(topic) <= 249:
        raise ConfigError("option 'topic' must be 1..249 characters")
    sink_id = opts.get("sinkId")
    if sink_id is not None and not sink_id:
        raise ConfigError("option 'sinkId' must not be empty")
    durability = opts.get("durability", "")
    if durability not in ("", "memory", "written", "synced"):
        raise ConfigError("option 'durability' must be memory, written or synced")
    url = _url(opts)
    return SinkOptions(
        url,
        topic,
        sink_id,
        _ca_file(opts),
        _token_file(opts),
        _zk_auth_file(opts, url),
        durability,
    )
