"""Browser tests: Debian's chromium driven by playwright, against real clusters.

Playwright's own browser builds are never downloaded (`playwright install` is not run): the
tests launch the chromium that `scripts/bootstrap --browser` installs from Debian. Without it
(or without the playwright package) they skip, saying how to get them; under CI they fail,
so that a missing install step cannot pass as green.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

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


def _missing(what: str) -> NoReturn:
    """Skip outside CI; fail under CI=true, where bootstrap --browser must have installed it."""
    reason = f"{what}: {INSTALL_HINT}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Iterator[tuple[Any, str]]:
    """Playwright, started once for the module, and the chromium executable it launches."""
    path = find_chromium()
    if path is None:
        _missing("no chromium found (TRITONMQ_CHROMIUM or chromium on PATH)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    with sync_playwright() as pw:
        yield pw, str(path)


@pytest.fixture(scope="module")
def browser(chromium: tuple[Any, str]) -> Iterator[Any]:
    """One headless chromium for the module (each test opens its own contexts), closed after."""
    pw, path = chromium
    b = pw.chromium.launch(executable_path=path, headless=True)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def trusting_browser(
    chromium: tuple[Any, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Any]]:
    """``trusting_browser(ca_file)``: a headless chromium that trusts that CA the proper way,
    as a user who imported it would: chromium on Linux reads its roots from the NSS database
    in ``$HOME/.pki/nssdb``, so the browser gets a fresh HOME whose database holds the CA
    (made with NSS's ``certutil``). Certificates are still checked (chain, host, dates)."""
    pw, path = chromium
    certutil = shutil.which("certutil")
    if certutil is None:
        _missing("no certutil (Debian's libnss3-tools) to make chromium trust a dev CA")
    launched: list[Any] = []

    def launch(ca_file: str) -> Any:
        home = tmp_path_factory.mktemp("chromium-home")
        nssdb = home / ".pki" / "nssdb"
        nssdb.mkdir(parents=True)
        db = f"sql:{nssdb}"
        subprocess.run([certutil, "-N", "-d", db, "--empty-password"], check=True)
        subprocess.run(
            [certutil, "-A", "-d", db, "-n", "tritonmq-dev-ca", "-t", "C,,", "-i", ca_file],
            check=True,
        )
        b = pw.chromium.launch(
            executable_path=path, headless=True, env={**os.environ, "HOME": str(home)}
        )
        launched.append(b)
        return b

    yield launch
    for b in launched:
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
