"""Is ZooKeeper there? A quick probe before a command's first session.

kazoo retries a connection until its whole timeout is spent and logs every try, so a
ZooKeeper that is not there (connection refused, known at once) and one that is not
ZooKeeper (a broker's port, a web server) both looked like a "time-out" several seconds
later. :func:`probe_zk` tells them apart quickly: it opens a TCP connection to each
``HOST:PORT`` of the connect string and sends ZooKeeper's session handshake
(``ConnectRequest``); the first server that answers with a ``ConnectResponse`` passes (the
session it opened is closed at once). When none does, it raises
:class:`ZkUnreachable`, whose message says why for each address: ``connection refused``,
``no answer within 2s``, ``unknown host``, ``not ZooKeeper (...)``.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Final

from tritonmq.errors import CoordinationError

PROBE_TIMEOUT: Final = 2.0
_CONNECT_REQUEST: Final = struct.pack(
    ">iqiqi16sB", 0, 0, 4000, 0, 16, b"\0" * 16, 0
)  # protocolVersion, lastZxidSeen, timeOut (ms), sessionId, passwd (len + bytes), readOnly
_CLOSE_SESSION: Final = struct.pack(">ii", 1, -11)  # xid 1, OpCode.closeSession


class ZkUnreachable(CoordinationError):
    """No address of a ZooKeeper connect string answered as ZooKeeper."""

    code = "ZK_UNREACHABLE"


def split_hosts(hosts: str) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT...][/chroot]`` as (host, port) pairs (port 2181 if none);
    a ZkUnreachable naming what is wrong if it is not one."""
    addrs: list[tuple[str, int]] = []
    for part in hosts.split("/", 1)[0].split(","):
        part = part.strip()
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        if not sep:
            host, port = part, "2181"
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ZkUnreachable(f"{part!r} is not a ZooKeeper HOST:PORT")
        addrs.append((host, int(port)))
    if not addrs:
        raise ZkUnreachable(f"{hosts!r} names no ZooKeeper HOST:PORT")
    return addrs


def _recv_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    data = b""
    while len(data) < n:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionResetError("closed the connection")
        data += chunk
    return data


def _probe_one(host: str, port: int, timeout: float) -> str | None:
    """None if ``host:port`` answers as ZooKeeper, else why not (a few words)."""
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return "unknown host"
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except OSError as e:
        return e.strerror or str(e)
    with sock:
        try:
            sock.sendall(struct.pack(">i", len(_CONNECT_REQUEST)) + _CONNECT_REQUEST)
            (length,) = struct.unpack(">i", _recv_exactly(sock, 4, deadline))
            if not 32 <= length <= 64:
                return "not ZooKeeper (it answered, but not a ZooKeeper handshake)"
            version, _timeout, _session, plen = struct.unpack(
                ">iiqi", _recv_exactly(sock, 20, deadline)
            )
            if version != 0 or plen != 16:
                return "not ZooKeeper (it answered, but not a ZooKeeper handshake)"
            sock.sendall(struct.pack(">i", len(_CLOSE_SESSION)) + _CLOSE_SESSION)
        except TimeoutError:
            return f"not ZooKeeper (no handshake within {timeout:g}s)"
        except OSError:
            return "not ZooKeeper, or not serving (it closed the connection)"
    return None


def probe_zk(hosts: str, timeout: float = PROBE_TIMEOUT) -> None:
    """Return if some address of ``hosts`` answers as ZooKeeper within ``timeout`` seconds
    (each); raise :class:`ZkUnreachable` ("cannot reach ZooKeeper at HOST:PORT: why")."""
    why: dict[str, str] = {}
    for host, port in split_hosts(hosts):
        failed = _probe_one(host, port, timeout)
        if failed is None:
            return
        why[f"{host}:{port}"] = failed
    if len(set(why.values())) == 1:
        raise ZkUnreachable(
            f"cannot reach ZooKeeper at {','.join(why)}: {next(iter(why.values()))}"
        )
    each = "; ".join(f"{a}: {w}" for a, w in why.items())
    raise ZkUnreachable(f"cannot reach ZooKeeper at {','.join(why)} ({each})")
