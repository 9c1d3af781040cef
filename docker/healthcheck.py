#!/usr/bin/env python3
"""Container health checks: `tritonmq-healthcheck zookeeper` or `tritonmq-healthcheck broker PORT`.

Exit 0 when healthy, 1 when not, with one line saying why (podman/docker keep it in the
container's health log).

zookeeper: `ruok` answers `imok` and `srvr` reports leader, follower or standalone (`ruok`
alone answers even without a quorum, when the server cannot serve).
broker: `GET /readyz` on the client port answers 200 (ZooKeeper session connected, role
known, a backup in the ISR; docs/operations.md, Metrics and health).

`tritonmq-healthcheck wait-zookeeper HOST:PORT,... [SECONDS]` waits until a majority of the
ensemble serves (the entrypoint runs it when TRITONMQ_WAIT_FOR_ZK is set): compose's
`condition: service_healthy` does that too, but podman-compose ignores it with podman < 4.6.
"""

from __future__ import annotations

import http.client
import socket
import sys
import time

TIMEOUT = 2.0
SERVING = ("leader", "follower", "standalone")


def four_letter_word(word: str, host: str = "127.0.0.1", port: int = 2181) -> str:
    with socket.create_connection((host, port), timeout=TIMEOUT) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def zk_mode(host: str = "127.0.0.1", port: int = 2181) -> str | None:
    """The ``Mode:`` line of ``srvr`` (leader, follower, standalone), None if not serving."""
    for line in four_letter_word("srvr", host, port).splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip()
    return None


def zookeeper() -> tuple[bool, str]:
    if four_letter_word("ruok") != "imok":
        return False, "ruok: no imok"
    mode = zk_mode()
    return mode in SERVING, f"mode {mode}"


def wait_zookeeper(hosts: str, seconds: float) -> tuple[bool, str]:
    members = [h.strip().rpartition(":") for h in hosts.split(",") if h.strip()]
    deadline = time.monotonic() + seconds
    while True:
        serving = 0
        for host, _, port in members:
            try:
                serving += zk_mode(host, int(port or 2181)) in SERVING
            except OSError:
                pass
        if serving > len(members) // 2:
            return True, f"{serving} of {len(members)} ZooKeeper servers serve"
        if time.monotonic() >= deadline:
            return False, f"only {serving} of {len(members)} ZooKeeper servers serve"
        time.sleep(0.5)


def broker(port: int) -> tuple[bool, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("GET", "/readyz")
        resp = conn.getresponse()
        body = resp.read(200).decode("utf-8", "replace").strip()
    finally:
        conn.close()
    return resp.status == 200, f"/readyz {resp.status} {body}"


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["zookeeper"] and len(argv) == 1:
            ok, why = zookeeper()
        elif argv[:1] == ["broker"] and len(argv) == 2 and argv[1].isdigit():
            ok, why = broker(int(argv[1]))
        elif argv[:1] == ["wait-zookeeper"] and len(argv) in (2, 3):
            ok, why = wait_zookeeper(argv[1], float(argv[2]) if len(argv) == 3 else 120.0)
        else:
            print(
                "usage: tritonmq-healthcheck zookeeper | broker PORT"
                " | wait-zookeeper HOST:PORT,... [SECONDS]",
                file=sys.stderr,
            )
            return 2
    except (OSError, http.client.HTTPException) as e:
        ok, why = False, f"{type(e).__name__}: {e}"
    print(("healthy: " if ok else "unhealthy: ") + why)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
