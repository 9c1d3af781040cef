"""Broker settings: defaults, overridden by a TOML file, overridden by flags."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonmq.errors import ConfigError


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    zk: str = "127.0.0.1:2181"
    chroot: str = "/tritonmq"
    group: str = "g1"
    id: str = "b1"
    listen: str = "127.0.0.1:0"
    advertise_host: str = ""
    advertise_repl: str = ""  # URL other brokers replicate from; empty: the client URL
    replicas: int = 3
    min_insync: int = 2
    unclean_election: bool = False
    session_timeout: float = 2.0
    replica_lag_timeout: float = 2.0
    window_records: int = 2000
    window_bytes: int = 4 * 1024 * 1024
    max_frame_bytes: int = 8 * 1024 * 1024
    max_batch_records: int = 10_000
    max_value_bytes: int = 1024 * 1024
    log_level: str = "INFO"
    # delivery, offsets, purge
    ack_timeout: float = 30.0
    ephemeral_grace: float = 10.0
    retention_s: float = 0.0
    topic_retention: dict[str, float] = dataclasses.field(default_factory=dict)
    dedup_window_s: float = 60.0
    dedup_max: int = 2_000_000
    max_bytes: int = 1024 * 1024 * 1024
    offset_interval: float = 0.2
    # a new primary waits this long (at most ephemeral_grace) for a shared subscription's
    # members to say what they acknowledged to the old one before it dispatches anything
    shared_resume_hold_s: float = 1.0

    # --- security: cluster (replication authentication, ZooKeeper ACLs) ---
    repl_listen: str = ""  # HOST:PORT of the replication listener; empty: listen's host, port 0
    cluster_secret_file: str = ""  # else env TRITONMQ_CLUSTER_SECRET (never a flag)
    zk_auth_file: str = ""  # "user:password" for ZooKeeper; else env TRITONMQ_ZK_AUTH(_FILE)
    zk_reader_file: str = ""  # zk:// clients' read-only identity; else TRITONMQ_ZK_READER_FILE
    insecure_cluster: bool = False  # no secret, no ZooKeeper ACLs: a local experiment only

    # --- security: TLS ---

    # --- security: client tokens, authorization, Origin ---

    # --- bounds: wire and per-connection ---

    # --- bounds: caps, names, memory accounting ---

    @property
    def effective_min_insync(self) -> int:
        """`min_insync` never exceeds the group size, so a 1-replica dev group can write."""
        return max(1, min(self.min_insync, self.replicas))

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_config(path: str | Path | None, **overrides: Any) -> BrokerConfig:
    """Read a TOML file (its ``[broker]`` table or top level), then apply non-None overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError as e:
            raise ConfigError(f"config file not found: {path}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from e
        values = dict(data.get("broker", data))
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
    defaults = BrokerConfig()
    for name, value in values.items():
        want = type(getattr(defaults, name))
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            values[name] = float(value)
        elif not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ConfigError(f"setting {name!r} must be {want.__name__}, got {value!r}")
    cfg = BrokerConfig(**values)
    if cfg.replicas < 1 or cfg.min_insync < 1:
        raise ConfigError("replicas and min_insync must be at least 1")
    if cfg.repl_listen and ":" not in cfg.repl_listen:
        raise ConfigError("repl_listen must be HOST:PORT")
    if cfg.advertise_repl and not cfg.advertise_repl.startswith(("ws://", "wss://")):
        raise ConfigError("advertise_repl must be a ws:// or wss:// URL")
    if not all(isinstance(v, int | float) and v >= 0 for v in cfg.topic_retention.values()):
        raise ConfigError("topic_retention maps topic names to seconds >= 0")
    if cfg.shared_resume_hold_s < 0:
        raise ConfigError("shared_resume_hold_s must be >= 0")
    if cfg.session_timeout < 0.4:
        raise ConfigError("session_timeout must be at least 0.4 s")
    return cfg
