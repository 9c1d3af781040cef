#!/usr/bin/env python3
"""Container health checks: `tritonmq-healthcheck zookeeper` or `tritonmq-healthcheck broker PORT`.

Exit 0 when healthy, 1 when not, with one line saying why (podman/docker keep it in the
container's health log).

zookeeper: `ruok` answers `imok` and `srvr` reports leader, follower or standalone (`ruok`
alone answers even without a quorum, when the server cannot serve).
broker: `GET /readyz` on the client port answers 200. A broker without `/readyz` (a version
that predates it) answers that path with another non-5xx status; it is taken as healthy
because its port serves, so that this image's health checks work with either.
"""

from __future__ import annotations

import http.client
import socket
import sys

TIMEOUT = 2.0


def four_letter_word(word: str, port: int = 2181) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def zookeeper() -> tuple[bool, str]:
    if four_letter_word("ruok") != "imok":
        return False, "ruok: no imok"
    for line in four_letter_word("srvr").splitlines():
        if line.startswith("Mode:"):
            mode = line.partition(":")[2].strip()
            return mode in ("leader", "follower", "standalone"), f"mode {mode}"
    return False, "srvr: no Mode (not serving)"


def broker(port: int) -> tuple[bool, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("GET", "/readyz")
        resp = conn.getresponse()
        body = resp.read(200).decode("utf-8", "replace").strip()
    finally:
        conn.close()
    if resp.status == 200:
        return True, f"/readyz 200 {body}"
    if resp.status >= 500:
        return False, f"/readyz {resp.status} {body}"
    return True, f"/readyz {resp.status}: no /readyz in this broker, its port serves"


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["zookeeper"] and len(argv) == 1:
            ok, why = zookeeper()
        elif argv[:1] == ["broker"] and len(argv) == 2 and argv[1].isdigit():
            ok, why = broker(int(argv[1]))
        else:
            print("usage: tritonmq-healthcheck zookeeper | broker PORT", file=sys.stderr)
            return 2
    except (OSError, http.client.HTTPException) as e:
        ok, why = False, f"{type(e).__name__}: {e}"
    print(("healthy: " if ok else "unhealthy: ") + why)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
