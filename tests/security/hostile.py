"""Attackers and a monitor for the hostile-client suite.

An attacker here is a raw websocket connection doing what no library does on its own: a
first fragment (FIN=0) and never the rest, a handshake and then silence, a replication
link that answers the challenge with a ``rack``. It answers pings (so keepalive never
closes it: only the broker's bounds may), and records how the broker ended it. Frames
are masked with the all-zero key, so one payload object is sent on every connection
without a copy each. The monitor is a well-behaved client publishing beside the attack.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import struct
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tritonmq import Client

MIB = 1024 * 1024
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class Refused(Exception):
    """The handshake was answered with an HTTP status other than 101."""

    def __init__(self, status: int) -> None:
        super().__init__(f"handshake refused with HTTP {status}")
        self.status = status


def frame(payload: bytes, opcode: int = BINARY, *, fin: bool = True) -> bytes:
    """A client frame's header (masked, all-zero key: the payload goes unchanged)."""
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", first, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", first, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, n)
    return head + b"\0\0\0\0"


class RawWs:
    """One raw websocket client connection (see the module doc)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.messages: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = asyncio.Event()
        self.close_code: int | None = None  # from the broker's close frame; None: none came
        self.close_reason = ""
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        url: str,
        subprotocol: str,
        *,
        handshake: bool = True,
        host_header: str | None = None,
        origin: str | None = None,
    ) -> RawWs:
        """Connect to ``url``; ``handshake=False`` leaves it at a bare TCP connection.
        ``host_header`` and ``origin``: what a browser would send (a page's, DNS rebinding)."""
        u = urlsplit(url)
        host, port = u.hostname or "127.0.0.1", u.port or 80
        reader, writer = await asyncio.open_connection(host, port)
        if not handshake:
            return cls(reader, writer)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = f"Origin: {origin}\r\n" if origin is not None else ""
        writer.write(
            (
                f"GET / HTTP/1.1\r\nHost: {host_header or f'{host}:{port}'}\r\n{extra}"
                f"Upgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {subprotocol}\r\n\r\n"
            ).encode()
        )
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except BaseException:
            writer.close()
            raise
        status = int(head.split()[1])
        if status != 101:
            writer.close()
            raise Refused(status)
        return cls(reader, writer)

    def send(self, payload: bytes, opcode: int = BINARY, *, fin: bool = True) -> None:
        if not self.writer.is_closing():
            self.writer.write(frame(payload, opcode, fin=fin))
            self.writer.write(payload)

    async def drained(self) -> None:
        """What was sent is with the kernel (or the connection is gone)."""
        with contextlib.suppress(OSError, ConnectionError):
            await self.writer.drain()

    async def recv(self, timeout: float = 10.0) -> bytes:
        return await asyncio.wait_for(self.messages.get(), timeout)

    async def _read(self) -> None:
        r = self.reader
        try:
            while True:
                b0, b1 = await r.readexactly(2)
                n = b1 & 0x7F
                if n == 126:
                    (n,) = struct.unpack("!H", await r.readexactly(2))
                elif n == 127:
                    (n,) = struct.unpack("!Q", await r.readexactly(8))
                payload = await r.readexactly(n)  # the broker's frames are not masked
                opcode = b0 & 0x0F
                if opcode == PING:
                    self.send(payload, PONG)
                elif opcode == CLOSE:
                    if len(payload) >= 2:
                        self.close_code = struct.unpack("!H", payload[:2])[0]
                        self.close_reason = payload[2:].decode(errors="replace")
                    break
                elif opcode in (TEXT, BINARY):
                    self.messages.put_nowait(payload)
        except (asyncio.IncompleteReadError, OSError, ConnectionError):
            pass
        finally:
            self.closed.set()
            self.writer.close()

    async def aclose(self) -> None:
        self.writer.close()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def close_all(conns: list[RawWs]) -> None:
    await asyncio.gather(*(c.aclose() for c in conns), return_exceptions=True)


# --- what a user checks ----------------------------------------------------------------


def status_bytes(pid: int, field: str) -> int:
    """A memory line of /proc/PID/status (VmRSS now, VmHWM the peak), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def metric(url: str, name: str) -> float:
    """The sum of a metric's samples on a broker's ``/metrics`` (``url``: its ws:// URL)."""
    http = url.replace("ws://", "http://", 1) + "/metrics"
    with urllib.request.urlopen(http, timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


async def until(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    """Wait until ``pred()`` is truthy, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


class Monitor:
    """A well-behaved client publishing one record after another beside the attack."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url, self.token = url, token
        self.acked = 0

    async def _run(self) -> None:
        async with Client(self.url, token=self.token, timeout=30) as c:
            while True:
                await c.publish("monitor", b"still here %d" % self.acked)
                self.acked += 1
                await asyncio.sleep(0.01)

    async def more_acks(self, n: int = 10, timeout: float = 30.0) -> None:
        """``n`` more publishes acknowledged, within ``timeout`` seconds."""
        want = self.acked + n
        await until(lambda: self.acked >= want, timeout, f"{n} more monitor acks")


@contextlib.asynccontextmanager
async def monitoring(url: str, token: str | None = None) -> AsyncIterator[Monitor]:
    m = Monitor(url, token)
    task = asyncio.create_task(m._run())
    try:
        await m.more_acks(3)
        yield m
        assert not task.done(), task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
