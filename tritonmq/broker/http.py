"""Plain HTTP on the client port: health, metrics, and the browser's page and client.

A GET that is not a websocket upgrade is answered in websockets' ``process_request``
hook, before any handshake: ``/healthz`` (the process serves: 200), ``/readyz`` (200
when :func:`tritonmq.core.health.readiness` says so, else 503 with the reason),
``/metrics`` (Prometheus), ``/`` (the chat page), ``/console`` (the web console, with
``/console-view.js``) and ``/tritonmq.js`` (the JavaScript client). The console's actions
are admin ops on its websocket, authorized by the core like any client's; nothing here
changes state. Other paths get 404, other methods 405. These requests skip the Origin check
(they open no websocket) but not the connection cap: at ``max_connections`` they get
503 like a handshake would. The connection is closed after the response.

The page and the client are package data of :mod:`tritonmq.web` (links to
``clients/`` in the repository, copied into a built wheel), read once at start; a file
missing from the installation is a clean 404 (the page falls back to a placeholder).
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from importlib import resources
from urllib.parse import urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from tritonmq.core.health import Readiness

log = logging.getLogger("tritonmq.broker")

Hook = Callable[[ServerConnection, Request], Response | None]

HTML = "text/html; charset=utf-8"
JAVASCRIPT = "text/javascript; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
WEB_PACKAGE = "tritonmq.web"
# path -> (files of tritonmq.web to try in order, content type)
WEB_ROUTES: Mapping[str, tuple[tuple[str, ...], str]] = {
    "/": (("index.html", "placeholder.html"), HTML),
    "/tritonmq.js": (("tritonmq.js",), JAVASCRIPT),
    "/console": (("console.html",), HTML),
    "/console-view.js": (("console-view.js",), JAVASCRIPT),
}


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str  # a strong validator: the content's hash, quoted

    @classmethod
    def of(cls, body: bytes, content_type: str) -> StaticFile:
        return cls(body, content_type, f'"{hashlib.sha256(body).hexdigest()[:32]}"')


def load_web_files(package: str = WEB_PACKAGE) -> dict[str, StaticFile]:
    """The files :data:`WEB_ROUTES` names, from the installed package; a route whose files
    are all missing is left out (it answers 404)."""
    root = resources.files(package)
    found: dict[str, StaticFile] = {}
    for path, (names, content_type) in WEB_ROUTES.items():
        for name in names:
            f = root / name
            if f.is_file():
                found[path] = StaticFile.of(f.read_bytes(), content_type)
                break
        else:
            log.info("no %s in %s: GET %s answers 404", " or ".join(names), package, path)
    return found


class HttpRoutes:
    """Answers plain-HTTP requests. ``ready`` and ``metrics`` are read per request, on
    the event loop (the core's thread)."""

    def __init__(
        self,
        files: Mapping[str, StaticFile],
        ready: Callable[[], Readiness],
        metrics: Callable[[str | None], tuple[bytes, str]],
    ) -> None:
        self.files = dict(files)
        self.ready = ready
        self.metrics = metrics

    def respond(self, request: Request) -> Response:
        if request.method != "GET":
            r = response(HTTPStatus.METHOD_NOT_ALLOWED, b"only GET is served here\n", TEXT)
            r.headers["Allow"] = "GET"
            return r
        path = urlsplit(request.path).path
        if path == "/healthz":
            return response(HTTPStatus.OK, b"ok\n", TEXT, cache="no-store")
        if path == "/readyz":
            ready = self.ready()
            status = HTTPStatus.OK if ready.ready else HTTPStatus.SERVICE_UNAVAILABLE
            return response(status, f"{ready.reason}\n".encode(), TEXT, cache="no-store")
        if path == "/metrics":
            body, content_type = self.metrics(_one(request, "Accept"))
            return response(HTTPStatus.OK, body, content_type, cache="no-store")
        if path == "/favicon.ico":  # every browser asks; no icon is no error
            return response(HTTPStatus.NO_CONTENT, b"", None, cache="max-age=86400")
        f = self.files.get(path)
        if f is None:
            return response(HTTPStatus.NOT_FOUND, b"not found\n", TEXT)
        if _matches(_one(request, "If-None-Match"), f.etag):
            r = response(HTTPStatus.NOT_MODIFIED, b"", None, cache="no-cache")
        else:
            r = response(HTTPStatus.OK, f.body, f.content_type, cache="no-cache")
        r.headers["ETag"] = f.etag
        return r


def is_upgrade(request: Request) -> bool:
    """Whether ``request`` asks for a websocket (else it is plain HTTP)."""
    upgrade = ",".join(request.headers.get_all("Upgrade")).lower()
    return "websocket" in upgrade


def plain_http(routes: HttpRoutes, cap: Hook, handshake: Hook) -> Hook:
    """One ``process_request`` hook: plain HTTP goes to ``routes`` once ``cap`` admits it;
    a websocket handshake goes to ``handshake`` (Origin check, then the cap)."""

    def hook(conn: ServerConnection, request: Request) -> Response | None:
        if is_upgrade(request):
            return handshake(conn, request)
        return cap(conn, request) or routes.respond(request)

    return hook


def response(
    status: HTTPStatus, body: bytes, content_type: str | None, *, cache: str | None = None
) -> Response:
    headers = Headers([("Date", email.utils.formatdate(usegmt=True)), ("Connection", "close")])
    if status not in (HTTPStatus.NOT_MODIFIED, HTTPStatus.NO_CONTENT):  # no body, no length
        headers["Content-Length"] = str(len(body))
    if content_type is not None:
        headers["Content-Type"] = content_type
        headers["X-Content-Type-Options"] = "nosniff"
    if cache is not None:
        headers["Cache-Control"] = cache
    return Response(status.value, status.phrase, headers, body)


def _one(request: Request, name: str) -> str | None:
    values = request.headers.get_all(name)
    return ", ".join(values) if values else None


def _matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison of ``If-None-Match`` against our ETag."""
    if if_none_match is None:
        return False
    tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in tags or etag in tags
