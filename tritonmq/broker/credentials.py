"""What a broker proves itself with: the cluster secret and its ZooKeeper credential.

Both come from files named in the config or from the environment, never from
flags (a command line is readable by every local user). A broker missing either
refuses to start, unless ``insecure_cluster = true`` says on purpose that this is
a local experiment; then it says so loudly in the log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tritonmq.config import BrokerConfig
from tritonmq.coord.zkclient import (
    ENV_AUTH,
    ENV_AUTH_FILE,
    ZkCredential,
    credential_from,
    reader_from,
)
from tritonmq.errors import ConfigError

log = logging.getLogger("tritonmq.broker")

ENV_SECRET: Final = "TRITONMQ_CLUSTER_SECRET"
ENV_SECRET_FILE: Final = "TRITONMQ_CLUSTER_SECRET_FILE"
MIN_SECRET_BYTES: Final = 16


@dataclass(frozen=True, slots=True)
class BrokerCredentials:
    secret: bytes | None = field(repr=False)  # None: follows are not authenticated
    zk: ZkCredential | None  # None: ZooKeeper without ACLs
    zk_reader: ZkCredential | None = None  # the zk:// clients' read-only identity


def _secret(text: bytes, where: str) -> bytes:
    secret = text.strip()
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(f"the cluster secret in {where} is shorter than {MIN_SECRET_BYTES} bytes")
    return secret


def cluster_secret(cfg: BrokerConfig, env: Mapping[str, str] | None = None) -> bytes | None:
    """The secret from ``cluster_secret_file``, else env; None when neither names one."""
    env = os.environ if env is None else env
    path = cfg.cluster_secret_file or env.get(ENV_SECRET_FILE, "")
    if path:
        try:
            return _secret(Path(path).read_bytes(), f"the file {path}")
        except OSError as e:
            raise ConfigError(f"cannot read the cluster secret file {path}: {e}") from e
    if env.get(ENV_SECRET):
        return _secret(env[ENV_SECRET].encode(), f"${ENV_SECRET}")
    return None


def load_credentials(cfg: BrokerConfig, env: Mapping[str, str] | None = None) -> BrokerCredentials:
    """Both credentials; ConfigError when one is missing and the cluster is not insecure."""
    creds = BrokerCredentials(
        cluster_secret(cfg, env),
        credential_from(cfg.zk_auth_file, env),
        reader_from(cfg.zk_reader_file, env),
    )
    missing = []
    if creds.secret is None:
        missing.append(f"a cluster secret (cluster_secret_file, or env {ENV_SECRET})")
    if creds.zk is None:
        missing.append(f"a ZooKeeper credential (zk_auth_file, or env {ENV_AUTH_FILE}/{ENV_AUTH})")
    if missing and not cfg.insecure_cluster:
        raise ConfigError(
            f"missing {' and '.join(missing)}; set insecure_cluster = true to run without"
        )
    return creds


def warn_if_insecure(creds: BrokerCredentials) -> None:
    if creds.secret is None:
        log.warning(
            "INSECURE: no cluster secret: anyone who reaches the replication port can follow "
            "as a member of the group (insecure_cluster = true)"
        )
    if creds.zk is None:
        log.warning(
            "INSECURE: no ZooKeeper credential: anyone who reaches ZooKeeper can read and "
            "rewrite this cluster's state, offsets and subscriptions (insecure_cluster = true)"
        )
