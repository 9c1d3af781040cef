"""Broker settings: defaults, overridden by a TOML file, overridden by flags."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonmq.errors import ConfigError

DEDUP_PAGE = 100_000  # BrokerConfig.dedup_page's default, the cores' too


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
    # uuids of the dedup window one producer may hold (a principal; a connection when
    # anonymous): past it that producer alone gets FULL (docs/replication.md, R7)
    dedup_max_per_producer: int = 1_000_000
    # uuids a frame when a broker hands another its dedup state (about 4 MB)
    dedup_page: int = DEDUP_PAGE
    max_bytes: int = 1024 * 1024 * 1024
    offset_interval: float = 0.2
    # a new primary that got no shared-subscription state from the old one (or whose members
    # sent no id) waits this long (at most ephemeral_grace) for the members to say what they
    # hold and acknowledged before it hands out what the old one may have handed out
    shared_resume_hold_s: float = 1.0

    # --- security: cluster (replication authentication, ZooKeeper ACLs) ---
    repl_listen: str = ""  # HOST:PORT of the replication listener; empty: listen's host, port 0
    cluster_secret_file: str = ""  # else env TRITONMQ_CLUSTER_SECRET (never a flag)
    zk_auth_file: str = ""  # "user:password" for ZooKeeper; else env TRITONMQ_ZK_AUTH(_FILE)
    zk_reader_file: str = ""  # zk:// clients' read-only identity; else TRITONMQ_ZK_READER_FILE
    insecure_cluster: bool = False  # no secret, no ZooKeeper ACLs: a local experiment only

    # --- security: TLS ---
    tls_cert: str = ""  # PEM certificate (chain) file: serve wss:// (clients and replication)
    tls_key: str = ""  # PEM private key file of tls_cert
    tls_ca: str = ""  # PEM CA file a follower verifies its primary with; empty: system store

    # --- security: client tokens, authorization, Origin ---
    auth_required: bool = False  # False: anonymous clients may do everything (dev)
    auth_key_file: str = ""  # HS*: the shared secret; RS*/ES*: a PEM public key
    auth_algorithms: list[str] = dataclasses.field(default_factory=lambda: ["HS256"])
    allowed_origins: list[str] = dataclasses.field(default_factory=list)  # []: same origin

    # --- bounds: wire and per-connection ---
    max_outbound_bytes: int = 16 * 1024 * 1024  # unsent bytes per client connection; close 4008
    # unsent bytes of all client connections together; past it the largest holder: 4008
    max_outbound_total_bytes: int = 256 * 1024 * 1024
    max_queue: int = 4  # received frames waiting per connection (each <= max_frame_bytes)
    max_frame_elements: int = 1_000_000  # msgpack values in one client frame; TOO_LARGE

    # --- bounds: caps, names, memory accounting ---
    max_connections: int = 10_000  # per broker; beyond it the handshake gets HTTP 503
    max_subscriptions_per_conn: int = 1_000  # a further `sub` gets LIMIT
    # per topic (every subscription of a topic is visited and sent each commit of it): LIMIT
    max_subscriptions_per_topic: int = 10_000  # a chat room's members (docs/security.md)
    max_topics: int = 100_000  # per group: a `pub`/`sub` creating one more gets LIMIT
    max_name_len: int = 249  # characters of a topic or subscription name (BAD_REQUEST)
    max_durable_per_principal: int = 1_000  # per group; anonymous is one principal; LIMIT

    # --- bounds: connections before they authenticate, and input held per broker ---
    hello_timeout: float = 10.0  # seconds from accept to the first accepted frame; close 4001
    max_unauthenticated: int = 1_000  # client connections waiting for it; past it the oldest: 4001
    max_hello_bytes: int = 64 * 1024  # largest message before that frame; close 1009
    max_inbound_bytes: int = 256 * 1024 * 1024  # per broker, received and not yet handled; 4013
    repl_auth_timeout: float = 5.0  # a replication link follows (or asks a handover) by then
    max_repl_pending: int = 64  # replication links not admitted yet; past it the oldest is closed

    # --- storage: segment files behind the in-memory log (docs/operations.md) ---
    data_dir: str = ""  # empty: memory only (a group that loses every replica loses its records)
    # when a publish that names no level is acknowledged (with a data_dir): "memory",
    # "written" (every in-sync replica handed it to its OS), "synced" (and fsynced it)
    durability: str = "written"
    segment_bytes: int = 64 * 1024 * 1024  # a segment file rolls past this size
    fsync_interval_s: float = 1.0  # the segment being written is fsynced this often (off-loop)
    disk_retention_s: float = 0.0  # a segment whose records are all purged is kept this long
    disk_retention_bytes: int = 0  # ... or while the segments take less than this (0: no bound)

    # --- presence: who is subscribed to a topic (soft state on the primary) ---
    max_presence_members: int = 1_000  # per topic: a further `sub` with presence gets LIMIT
    max_presence_info_bytes: int = 256  # UTF-8 bytes of a `sub`'s presence `info`; LIMIT
    # join/leave pushes one connection's presence changes may cause: a refill rate and a
    # burst; a `sub` whose change would overdraw them gets LIMIT
    presence_pushes_per_s: float = 1_000.0
    presence_burst: int = 10_000

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
    if bool(cfg.tls_cert) != bool(cfg.tls_key):
        raise ConfigError("tls_cert and tls_key go together: name both files or neither")
    if cfg.tls_cert and cfg.advertise_repl.startswith("ws://"):
        raise ConfigError(
            "a broker with tls_cert serves wss:// only: advertise_repl must be wss://"
        )
    if cfg.shared_resume_hold_s < 0:
        raise ConfigError("shared_resume_hold_s must be >= 0")
    if cfg.session_timeout < 0.4:
        raise ConfigError("session_timeout must be at least 0.4 s")
    if (
        min(
            cfg.max_connections,
            cfg.max_subscriptions_per_conn,
            cfg.max_subscriptions_per_topic,
            cfg.max_topics,
        )
        < 1
    ):
        raise ConfigError(
            "max_connections, max_subscriptions_per_conn, max_subscriptions_per_topic, "
            "max_topics must be >= 1"
        )
    if not 1 <= cfg.max_name_len <= 249:
        raise ConfigError("max_name_len must be 1..249 (the wire's own bound)")
    if cfg.max_presence_members < 1 or cfg.max_presence_info_bytes < 0:
        raise ConfigError("max_presence_members must be >= 1, max_presence_info_bytes >= 0")
    if cfg.durability not in ("memory", "written", "synced"):
        raise ConfigError("durability must be memory, written or synced")
    if cfg.segment_bytes < 4096 or cfg.fsync_interval_s <= 0:
        raise ConfigError("segment_bytes must be >= 4096 and fsync_interval_s > 0")
    if cfg.disk_retention_s < 0 or cfg.disk_retention_bytes < 0:
        raise ConfigError("disk_retention_s and disk_retention_bytes must be >= 0")
    if not 1 <= cfg.dedup_max_per_producer <= cfg.dedup_max:
        raise ConfigError("dedup_max_per_producer must be 1..dedup_max")
    if cfg.max_durable_per_principal < 1:
        raise ConfigError("max_durable_per_principal must be >= 1")
    if cfg.presence_pushes_per_s <= 0 or cfg.presence_burst < cfg.max_presence_members:
        raise ConfigError(
            "presence_pushes_per_s must be > 0 and presence_burst at least max_presence_members"
            " (a join to a full topic must fit)"
        )
    _check_client_security(cfg)
    check_wire_bounds(cfg)
    check_admission_bounds(cfg)
    return cfg


TOKEN_ALGORITHMS = frozenset(
    {"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512"}
)


def _check_client_security(cfg: BrokerConfig) -> None:
    algs = cfg.auth_algorithms
    if not algs or not all(isinstance(a, str) and a in TOKEN_ALGORITHMS for a in algs):
        raise ConfigError(
            f"auth_algorithms must name some of {', '.join(sorted(TOKEN_ALGORITHMS))}"
        )
    if len({a[:2] for a in algs}) > 1:
        raise ConfigError(
            "auth_algorithms must not mix HS*, RS* and ES*: one key verifies them all"
        )
    if not all(isinstance(o, str) and o for o in cfg.allowed_origins):
        raise ConfigError("allowed_origins must be a list of origins, or ['*']")
    if cfg.auth_key_file and not Path(cfg.auth_key_file).is_file():
        raise ConfigError(f"auth_key_file {cfg.auth_key_file} is not a readable file")
    if cfg.auth_required and not (cfg.auth_key_file or os.environ.get("TRITONMQ_AUTH_KEY")):
        raise ConfigError("auth_required needs a key: set auth_key_file or $TRITONMQ_AUTH_KEY")


def check_wire_bounds(cfg: BrokerConfig) -> None:
    """A subscriber's window must fit under the outbound cap, or a consumer reading at its
    pace would be closed for it; the other bounds must allow a frame at all."""
    if cfg.max_outbound_bytes < cfg.window_bytes + cfg.max_value_bytes:
        raise ConfigError(
            f"max_outbound_bytes ({cfg.max_outbound_bytes}) must be at least window_bytes + "
            f"max_value_bytes ({cfg.window_bytes + cfg.max_value_bytes})"
        )
    if cfg.max_outbound_total_bytes < cfg.max_outbound_bytes:
        raise ConfigError(
            f"max_outbound_total_bytes ({cfg.max_outbound_total_bytes}) must be at least "
            f"max_outbound_bytes ({cfg.max_outbound_bytes})"
        )
    if cfg.max_queue < 1:
        raise ConfigError("max_queue must be at least 1")
    if cfg.max_frame_elements < 5 * cfg.max_batch_records:  # a record is an array of 4
        raise ConfigError(
            f"max_frame_elements ({cfg.max_frame_elements}) must be at least 5 x "
            f"max_batch_records ({5 * cfg.max_batch_records}), or full batches are refused"
        )


HELLO_MIN_BYTES = 20 * 1024  # a `hello` with the longest token the wire allows (16,384 chars)


def check_admission_bounds(cfg: BrokerConfig) -> None:
    """A ``hello`` must fit before admission, a largest message in the broker's input
    budget, and every deadline and cap must let someone in."""
    if not HELLO_MIN_BYTES <= cfg.max_hello_bytes <= cfg.max_frame_bytes:
        raise ConfigError(
            f"max_hello_bytes must be {HELLO_MIN_BYTES}..max_frame_bytes ({cfg.max_frame_bytes})"
            ": a hello with the longest token must fit"
        )
    if cfg.max_inbound_bytes < cfg.max_frame_bytes:
        raise ConfigError(
            f"max_inbound_bytes ({cfg.max_inbound_bytes}) must be at least max_frame_bytes "
            f"({cfg.max_frame_bytes}), or a largest message could never be received"
        )
    if cfg.hello_timeout <= 0 or cfg.repl_auth_timeout <= 0:
        raise ConfigError("hello_timeout and repl_auth_timeout must be > 0 seconds")
    if cfg.max_unauthenticated < 1 or cfg.max_repl_pending < 1:
        raise ConfigError("max_unauthenticated and max_repl_pending must be >= 1")
