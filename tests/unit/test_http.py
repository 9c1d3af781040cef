"""Plain HTTP on the client port: routes, caching, errors, and the hook order (cap, Origin)."""

from __future__ import annotations

import asyncio
import ssl
import sys
import urllib.error
import urllib.request
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.asyncio.client import connect
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus
from websockets.http11 import Request, Response

from tritonmq import tlsconfig
from tritonmq.broker import http
from tritonmq.broker.admission import CLOSE_NO_HELLO, Admission
from tritonmq.broker.origin import origin_check
from tritonmq.config import BrokerConfig
from tritonmq.core.health import Readiness
from tritonmq.devtools.certs import make_dev_certs
from tritonmq.wire.frames import SUBPROTOCOL

REPO = Path(__file__).resolve().parents[2]
PAGE = http.StaticFile.of(b"<!doctype html><p>chat</p>", http.HTML)
CLIENT = http.StaticFile.of(b"export const connect = 1;\n", http.JAVASCRIPT)


def client_cap(max_connections: int) -> Admission:
    return Admission(
        what="client connection",
        max_pending=100,
        timeout=10.0,
        close_code=CLOSE_NO_HELLO,
        timeout_reason="no hello in time",
        max_admitted=max_connections,
    )


class Conn:
    def respond(self, status: HTTPStatus, text: str) -> Response:
        return Response(status.value, status.phrase, Headers(), text.encode())


def get(path: str, method: str = "GET", **headers: str) -> Request:
    return Request(path, Headers([(k.replace("_", "-"), v) for k, v in headers.items()]), method)


READY = Readiness(True, "primary of g1 at epoch 3")


def routes(ready: Readiness = READY) -> http.HttpRoutes:
    def metrics(accept: str | None) -> tuple[bytes, str]:
        return f"tritonmq_up 1 # {accept}\n".encode(), "text/plain; version=0.0.4"

    return http.HttpRoutes({"/": PAGE, "/tritonmq.js": CLIENT}, lambda: ready, metrics)


def test_health_and_readiness_answer_200_or_503_with_the_reason_and_are_never_cached() -> None:
    r = routes().respond(get("/healthz"))
    assert (r.status_code, r.body) == (200, b"ok\n")
    assert r.headers["Cache-Control"] == "no-store"
    ok = routes().respond(get("/readyz"))
    assert (ok.status_code, ok.body) == (200, b"primary of g1 at epoch 3\n")
    down = routes(Readiness(False, "backup of g1 catching up: not in the ISR yet"))
    r = down.respond(get("/readyz"))
    assert r.status_code == 503 and b"catching up" in r.body
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_metrics_are_served_in_the_format_the_scraper_accepts() -> None:
    r = routes().respond(get("/metrics", Accept="application/openmetrics-text"))
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/plain; version=0.0.4"
    assert r.body == b"tritonmq_up 1 # application/openmetrics-text\n"


def test_the_page_and_the_client_have_their_content_types_an_etag_and_no_cache() -> None:
    page = routes().respond(get("/"))
    assert page.status_code == 200 and page.body == PAGE.body
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert page.headers["Cache-Control"] == "no-cache"
    assert page.headers["ETag"] == PAGE.etag and page.headers["ETag"].startswith('"')
    assert page.headers["Content-Length"] == str(len(PAGE.body))
    js = routes().respond(get("/tritonmq.js?v=2"))  # a query string names the same file
    assert js.body == CLIENT.body
    assert js.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert js.headers["ETag"] != page.headers["ETag"]


@pytest.mark.parametrize(
    "if_none_match", [PAGE.etag, f"W/{PAGE.etag}", f'"other", {PAGE.etag}', "*"]
)
def test_a_revalidation_with_a_matching_etag_gets_304_without_a_body(if_none_match: str) -> None:
    r = routes().respond(get("/", If_None_Match=if_none_match))
    assert r.status_code == 304 and r.body == b""
    assert r.headers["ETag"] == PAGE.etag and r.headers["Cache-Control"] == "no-cache"
    assert "Content-Length" not in r.headers


def test_a_stale_etag_gets_the_file_again() -> None:
    r = routes().respond(get("/", If_None_Match='"an-older-version"'))
    assert r.status_code == 200 and r.body == PAGE.body


def test_other_paths_get_404_and_other_methods_405_naming_get() -> None:
    for path in ("/index.html", "/metrics/", "/../setup.cfg", "/tritonmq.d.ts"):
        r = routes().respond(get(path))
        assert r.status_code == 404, path
    missing = http.HttpRoutes({}, lambda: Readiness(True, ""), lambda a: (b"", ""))
    assert missing.respond(get("/tritonmq.js")).status_code == 404
    for method in ("POST", "HEAD", "PUT", "DELETE"):
        r = routes().respond(get("/metrics", method))
        assert r.status_code == 405 and r.headers["Allow"] == "GET", method


def test_plain_http_passes_the_cap_but_not_the_origin_check_and_upgrades_go_on() -> None:
    seen: list[str] = []

    def handshake(conn: Any, request: Request) -> Response | None:
        seen.append(request.path)
        return None

    cap = client_cap(1)
    hook = http.plain_http(routes(), cap.process_request, handshake)
    r = hook(Conn(), get("/", Origin="https://elsewhere.example"))  # type: ignore[arg-type]
    assert r is not None and r.status_code == 200 and seen == []
    upgrade = get("/", Upgrade="websocket", Connection="Upgrade")
    assert hook(Conn(), upgrade) is None and seen == ["/"]  # type: ignore[arg-type]
    cap.admitted.add(Conn())  # type: ignore[arg-type]  # at max_connections: plain HTTP is refused like a handshake
    r = hook(Conn(), get("/healthz"))  # type: ignore[arg-type]
    assert r is not None and r.status_code == 503


def test_the_packaged_page_is_the_chat_page_when_the_repository_has_one() -> None:
    files = http.load_web_files()
    chat = REPO / "clients" / "examples" / "chat" / "index.html"
    placeholder = REPO / "tritonmq" / "web" / "placeholder.html"
    want = chat if chat.is_file() else placeholder
    assert files["/"].body == want.read_bytes()
    client = REPO / "clients" / "js" / "tritonmq.js"
    if client.is_file():
        assert files["/tritonmq.js"].body == client.read_bytes()
    else:
        assert "/tritonmq.js" not in files
    console = REPO / "clients" / "console"
    assert files["/console"].body == (console / "index.html").read_bytes()
    assert files["/console"].content_type == http.HTML
    assert files["/console-view.js"].body == (console / "view.js").read_bytes()
    assert files["/console-view.js"].content_type == http.JAVASCRIPT


def test_a_package_without_the_files_serves_the_placeholder_and_404(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "webless"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "placeholder.html").write_text("<p>placeholder</p>")
    (pkg / "tritonmq.js").symlink_to(tmp_path / "nowhere.js")  # a link not yet filled
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "webless", raising=False)
    files = http.load_web_files("webless")
    assert files["/"].body == b"<p>placeholder</p>" and "/tritonmq.js" not in files


def fetch(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


async def test_a_real_server_answers_http_and_still_speaks_websocket_on_the_same_port() -> None:
    cap = client_cap(10)
    hook = http.plain_http(routes(), cap.process_request, cap.after(origin_check([])))

    async def echo(ws: Any) -> None:
        await ws.send("hi")

    async with websockets.serve(
        echo,
        "127.0.0.1",
        0,
        subprotocols=[SUBPROTOCOL],
        process_request=hook,  # type: ignore[list-item]
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        status, headers, body = await asyncio.to_thread(fetch, base + "/")
        assert (status, body) == (200, PAGE.body)
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        status, _, body = await asyncio.to_thread(fetch, base + "/", **{"If-None-Match": PAGE.etag})
        assert (status, body) == (304, b"")
        status, _, body = await asyncio.to_thread(
            fetch, base + "/readyz", Origin="https://elsewhere.example"
        )
        assert status == 200, "plain HTTP skips the Origin check"
        async with connect(f"ws://127.0.0.1:{port}", subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
            assert await ws.recv() == "hi"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(
                f"ws://127.0.0.1:{port}",
                subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                origin="https://elsewhere.example",  # type: ignore[arg-type]
            ):
                pass
        assert refused.value.response.status_code == 403


async def test_over_tls_the_same_routes_answer_https(tmp_path: Path) -> None:
    certs = make_dev_certs(tmp_path)
    cfg = BrokerConfig(tls_cert=str(certs.cert), tls_key=str(certs.key))
    cap = client_cap(10)
    hook = http.plain_http(routes(), cap.process_request, cap.after(origin_check([])))
    trusted = ssl.create_default_context(cafile=str(certs.ca))

    def fetch_tls(url: str) -> tuple[int, bytes]:
        with urllib.request.urlopen(url, timeout=5, context=trusted) as r:
            return r.status, r.read()

    async with websockets.serve(
        lambda ws: ws.close(),
        "127.0.0.1",
        0,
        process_request=hook,
        ssl=tlsconfig.server_context(cfg),
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"https://127.0.0.1:{port}"
        assert await asyncio.to_thread(fetch_tls, url + "/readyz") == (
            200,
            READY.reason.encode() + b"\n",
        )
        assert await asyncio.to_thread(fetch_tls, url + "/tritonmq.js") == (200, CLIENT.body)


def test_favicon_is_no_content_not_a_404() -> None:
    """Every browser asks for /favicon.ico: a 404 was an error line in each page's console."""
    r = routes().respond(get("/favicon.ico"))
    assert r.status_code == 204 and r.body == b""
    assert "max-age" in r.headers["Cache-Control"]  # asked once, not on every page load
