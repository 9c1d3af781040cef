"""Browser tests: Debian's chromium driven by playwright, against real clusters.

Playwright's own browser builds are never downloaded (`playwright install` is not run): the
tests launch the chromium that `scripts/bootstrap --browser` installs from Debian. Without it
(or without the playwright package) they skip, saying how to get them; under CI they fail,
so that a missing install step cannot pass as green.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import make_cluster  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
CHAT_PAGE = ROOT / "clients" / "examples" / "chat" / "index.html"
JS_CLIENT = ROOT / "clients" / "js" / "tritonmq.js"

# Where Debian (and Ubuntu's older packages) put chromium; TRITONMQ_CHROMIUM overrides.
CHROMIUM_NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = "run scripts/bootstrap --browser (Debian's chromium and the playwright package)"


def find_chromium() -> str | None:
    """The chromium executable to drive: $TRITONMQ_CHROMIUM, else the first on PATH."""
    explicit = os.environ.get("TRITONMQ_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _missing(what: str) -> None:
    """Skip outside CI; fail under CI=true, where bootstrap --browser must have installed it."""
    reason = f"{what}: {INSTALL_HINT}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for the module (each test opens its own contexts), closed after."""
    chromium = find_chromium()
    if chromium is None:
        _missing("no chromium found (TRITONMQ_CHROMIUM or chromium on PATH)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield b
        finally:
            b.close()


class _StaticHandler(BaseHTTPRequestHandler):
    """Serves a fixed map of paths to files, read on each request."""

    files: dict[str, tuple[Path, str]] = {}

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        entry = self.files.get(path)
        if entry is None or not entry[0].is_file():
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        body = entry[0].read_bytes()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", entry[1])
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


@pytest.fixture
def static_site() -> Iterator[Callable[[str], str]]:
    """A tiny web server of another origin serving the chat page at ``/`` and the client at
    ``/tritonmq.js`` (as a broker does); ``static_site(host)`` starts one on ``host`` and
    returns its origin. Stopped at teardown."""
    servers: list[ThreadingHTTPServer] = []
    threads: list[threading.Thread] = []

    class Handler(_StaticHandler):
        files = {
            "/": (CHAT_PAGE, "text/html; charset=utf-8"),
            "/index.html": (CHAT_PAGE, "text/html; charset=utf-8"),
            "/tritonmq.js": (JS_CLIENT, "text/javascript; charset=utf-8"),
        }

    def start(host: str = "127.0.0.1") -> str:
        server = ThreadingHTTPServer((host, 0), Handler)
        server.daemon_threads = True
        t = threading.Thread(target=server.serve_forever, name="static-site", daemon=True)
        t.start()
        servers.append(server)
        threads.append(t)
        return f"http://{host}:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()
    for t in threads:
        t.join(timeout=10)
