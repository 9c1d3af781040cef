#!/usr/bin/env bash
# Make the credentials docker/compose.yaml mounts as secrets, once: the ZooKeeper digest
# credential (user:password) and the brokers' cluster secret. Existing files are kept, so
# that a running cluster's ZooKeeper ACLs still match. Usage: docker/secrets.sh [DIR]
# (default: docker/.secrets, which compose reads; TRITONMQ_SECRETS_DIR overrides both).
set -euo pipefail

dir="${1:-${TRITONMQ_SECRETS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.secrets}}"
# Only the owner may enter the directory. The files themselves are world-readable so that
# the containers' non-root user can read them through their bind mounts.
mkdir -p "$dir"
chmod 0700 "$dir"

make() {
    local file="$dir/$1"
    if [[ ! -s "$file" ]]; then
        (umask 022 && printf '%s\n' "$2" >"$file.tmp" && mv "$file.tmp" "$file")
        echo "secrets.sh: wrote $file" >&2
    fi
}

rand() { python3 -c 'import secrets, sys; print(secrets.token_hex(int(sys.argv[1])))' "$1"; }

make zk.auth "tritonmq:$(rand 24)"
make cluster.secret "$(rand 32)"
