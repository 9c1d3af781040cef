"""A TCP proxy that tests put between real processes to partition them on demand.

Signals (SIGKILL, SIGSTOP) fail a whole process. A partition is different: both
sides keep running and keep reaching everyone else, only the link between them
is gone. Without root or network namespaces, a proxy in the path is the one
place where such a link can be cut, so the dev cluster routes replication and
ZooKeeper traffic through one (:class:`tritonmq.devtools.cluster.DevCluster`, isolated).

A cut behaves like a real partition, not like a crash: no reset and no FIN
reaches either side. Bytes already on a matched connection stop moving in both
directions (TCP would retransmit into the void), and new connections from a
matched source are accepted but held without being forwarded, so a peer sees a
handshake or keepalive *timeout*, exactly what it must survive in production.
On heal every held connection moves again (late, like a retransmission that
finally got through); whatever a peer gave up on in between it has closed
itself, and the close travels on.

Connections are matched by the client's source IP: every broker of an isolated
dev cluster dials from its own loopback address (127.0.0.11, 127.0.0.12, ...).

The proxy runs its own asyncio loop on a daemon thread, so that blocking test
code and asyncio tests alike can drive it; :meth:`Proxy.cut` and
:meth:`Proxy.heal` return once the change is in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterable
from typing import Any, Self

_CHUNK = 64 * 1024
_CALL_TIMEOUT = 10.0


class _Conn:
    """One proxied connection; ``flowing`` is cleared while its source is cut."""

    __slots__ = ("source", "flowing", "writers", "task")

    def __init__(self, source: str, task: asyncio.Task[Any] | None) -> None:
        self.source = source
        self.flowing = asyncio.Event()
        self.writers: list[asyncio.StreamWriter] = []
        self.task = task


class Proxy:
    """Forward ``listen_host:<port>`` to ``target_host:target_port``, with partition controls."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.port = listen_port
        self._cut_all = False
        self._cut_hosts: set[str] = set()
        self._conns: set[_Conn] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        """``host:port`` where the proxy listens (after :meth:`start`)."""
        return f"{self.listen_host}:{self.port}"

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> int:
        """Start listening on a thread of its own; returns the port."""
        if self._loop is not None:
            return self.port
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name=f"netproxy->{self.target[1]}", daemon=True
        )
        self._thread.start()
        try:
            self._call(self._listen())
        except BaseException:
            self.stop()
            raise
        return self.port

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.listen_host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Close the listener and every connection, then end the thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        if loop.is_running():
            with contextlib.suppress(Exception):
                self._call(self._close_all())
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=_CALL_TIMEOUT)
        loop.close()
        self._loop = self._thread = None

    async def _close_all(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [c.task for c in self._conns if c.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._conns.clear()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- partition controls ------------------------------------------------------

    def cut(self, from_hosts: Iterable[str] | None = None) -> None:
        """Partition clients whose source IP is in ``from_hosts`` (None: every client).

        Cuts add up: ``cut({a})`` then ``cut({b})`` leaves both cut until healed.
        """
        hosts = None if from_hosts is None else set(from_hosts)

        def apply() -> None:
            if hosts is None:
                self._cut_all = True
            else:
                self._cut_hosts |= hosts
            self._refresh()

        self._run(apply)

    def heal(self, from_hosts: Iterable[str] | None = None) -> None:
        """Undo cuts: of ``from_hosts`` only, or (None) every cut, including a cut of everyone."""
        hosts = None if from_hosts is None else set(from_hosts)

        def apply() -> None:
            if hosts is None:
                self._cut_all = False
                self._cut_hosts.clear()
            else:
                self._cut_hosts -= hosts
            self._refresh()

        self._run(apply)

    def is_cut(self, host: str) -> bool:
        """Would traffic from source IP ``host`` be held now?"""
        return self._cut_all or host in self._cut_hosts

    def _refresh(self) -> None:
        for c in self._conns:
            if self.is_cut(c.source):
                c.flowing.clear()
            else:
                c.flowing.set()

    # --- forwarding --------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        conn = _Conn(str(peer[0]) if peer else "", asyncio.current_task())
        conn.writers.append(writer)
        self._conns.add(conn)
        if not self.is_cut(conn.source):
            conn.flowing.set()
        try:
            await conn.flowing.wait()  # a blackholed client waits here, its bytes unread
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                # The target is down: reset, so the client sees a refusal as it would without
                # a proxy (a clean close would look like a broken server instead).
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            conn.writers.append(up_writer)
            pipes = [
                asyncio.ensure_future(self._pipe(conn, reader, up_writer)),
                asyncio.ensure_future(self._pipe(conn, up_reader, writer)),
            ]
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pipes:
                    p.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        finally:
            self._conns.discard(conn)
            for w in conn.writers:
                w.close()

    @staticmethod
    async def _pipe(conn: _Conn, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Copy until EOF; while cut, the chunk in hand waits and nothing more is read."""
        with contextlib.suppress(OSError):
            while True:
                data = await src.read(_CHUNK)
                await conn.flowing.wait()
                if not data:
                    return
                dst.write(data)
                await dst.drain()

    # --- calling into the proxy's loop -----------------------------------------------

    def _run(self, fn: Any) -> None:
        if self._loop is None:
            fn()  # not started: nothing to race with
            return

        async def call() -> None:
            fn()

        self._call(call())

    def _call(self, coro: Any) -> Any:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the proxy is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(_CALL_TIMEOUT)
