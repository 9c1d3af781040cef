"""The chat page (clients/examples/chat/index.html) in real chromium against real clusters.

What a user would check: two people in one room see each other's messages; when the group's
primary is SIGKILLed both pages show the connection drop and come back, and every message
sent before, during and after the failover is on both screens exactly once (counted by the
record's ts and the message's id in the DOM); a page closed and opened again shows what it
missed; over ``wss://`` with tokens the same holds; a page from an origin the brokers do not
allow never connects.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.integration.conftest import wait_new_primary
from tritonmq.devtools.cluster import DevCluster, wait_for

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the install hint
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.browser

WAIT_MS = 45_000  # a failover on a loaded 2-core machine: election, then the clients' backoff
ROOM = "lobby"
TRITONMQ = [sys.executable, "-m", "tritonmq"]


ONLINE_IS = """want => JSON.stringify(
    [...document.querySelectorAll('#online li')].map(e => e.textContent).sort())
    === JSON.stringify(want)"""


def chat_url(site: str, name: str, broker: str, token: str | None = None, room: str = ROOM) -> str:
    q = {"name": name, "room": room, "broker": broker}
    if token:
        q["token"] = token
    return f"{site}/?{urlencode(q)}"


def open_chat(browser: Any, url: str) -> Any:
    """A page of its own browser context (as another user's browser would be)."""
    page = browser.new_context(viewport={"width": 960, "height": 600}).new_page()
    page.goto(url)
    return page


def send(page: Any, text: str) -> None:
    page.fill("#text", text)
    page.press("#text", "Enter")


def shown(page: Any) -> list[dict[str, Any]]:
    """The messages on screen, in order: ts, message id, sender, text."""
    rows: list[dict[str, Any]] = page.eval_on_selector_all(
        "#messages li.msg",
        """els => els.map(e => ({ts: Number(e.dataset.ts), id: e.dataset.id,
             who: e.querySelector('.who').textContent,
             text: e.querySelector('.text').textContent}))""",
    )
    return rows


def wait_shown(page: Any, n: int) -> list[dict[str, Any]]:
    expect(page.locator("#messages li.msg")).to_have_count(n, timeout=WAIT_MS)
    return shown(page)


def assert_exactly(rows: list[dict[str, Any]], texts: set[str]) -> None:
    """Each message once (by ts and by id), none missing, in ts order."""
    ts = [r["ts"] for r in rows]
    ids = [r["id"] for r in rows]
    assert len(set(ts)) == len(ts), f"a ts shown twice: {ts}"
    assert len(set(ids)) == len(ids), f"a message shown twice under two ts: {rows}"
    assert ts == sorted(ts), f"out of order: {ts}"
    assert {r["text"] for r in rows} == texts


def wait_connected(page: Any) -> None:
    expect(page.locator("#state")).to_have_attribute("data-state", "connected", timeout=WAIT_MS)


LOST = '#messages li.event[data-state]:not([data-state="connected"])'
RESUMED = "#messages li.event[data-resumed]"


def wait_dropped_and_back(page: Any) -> None:
    """The page showed that it lost its connection (none was shown before the kill), then
    is connected again, and that its subscription resumed right after the last message it
    showed (recovered: nothing skipped)."""
    expect(page.locator(LOST).first).to_be_attached(timeout=WAIT_MS)
    wait_connected(page)
    expect(page.locator(RESUMED).first).to_be_attached(timeout=WAIT_MS)
    how = page.eval_on_selector_all(RESUMED, "els => els.map(e => e.dataset.resumed)")
    assert set(how) == {"recovered"}, how


def wait_online(page: Any, names: list[str]) -> None:
    """The page's online list (presence) shows exactly these people, in any order."""
    want = sorted(names)
    try:
        page.wait_for_function(ONLINE_IS, arg=want, timeout=WAIT_MS)
    except Exception as e:
        now = page.eval_on_selector_all("#online li", "els => els.map(e => e.textContent)")
        raise AssertionError(f"online list {now}, want {want}") from e


def a_backup(c: DevCluster) -> str:
    """A live broker that is not the primary."""
    primary = c.primary()
    return next(b.url for b in c.brokers.values() if b.id != primary and b.alive)


def screens(browser: Any) -> str:
    """What every open page shows: its state badge, then each line of the room."""
    out = []
    for ctx in browser.contexts:
        for page in ctx.pages:
            out.append(f"{page.url}: {page.locator('#state').text_content()}")
            out += page.eval_on_selector_all(
                "#messages li, #online li",
                "els => els.map(e => `  ${e.className || 'online'} ${e.dataset.ts ?? ''} "
                "${e.textContent}`)",
            )
    return "\n".join(out)


def chat_through_a_failover(
    c: DevCluster, browser: Any, site: str, tokens: dict[str, str | None], shot: Path | None
) -> None:
    """The whole story, for ws:// and wss:// alike; on a failure, what the pages showed."""
    try:
        _chat_through_a_failover(c, browser, site, tokens, shot)
    except Exception as e:
        raise AssertionError(f"the pages showed:\n{screens(browser)}") from e


def _chat_through_a_failover(
    c: DevCluster, browser: Any, site: str, tokens: dict[str, str | None], shot: Path | None
) -> None:
    broker = a_backup(c)  # bootstrap through a broker that stays up: the client learns the rest
    alice = open_chat(browser, chat_url(site, "alice", broker, tokens["alice"]))
    bob = open_chat(browser, chat_url(site, "bob", broker, tokens["bob"]))
    for p in (alice, bob):
        wait_connected(p)
        wait_online(p, ["alice", "bob"])

    sent: set[str] = set()

    def say(page: Any, text: str) -> None:
        send(page, text)
        sent.add(text)

    say(alice, "hi bob")
    say(bob, "hi alice, how is the failover going?")
    say(alice, "not yet started")
    for p in (alice, bob):
        assert_exactly(wait_shown(p, len(sent)), sent)

    for p in (alice, bob):  # nothing lost or resumed yet: what follows is the failover's
        expect(p.locator(LOST)).to_have_count(0)
        expect(p.locator(RESUMED)).to_have_count(0)
    old = c.primary()
    assert old is not None
    c.kill(old)  # SIGKILL
    # sent while the primary is dead: the client keeps them and retries with the same uuids
    say(alice, "sent while the primary is down")
    say(bob, "me too: it waits for the new primary")
    wait_new_primary(c, old)
    for p in (alice, bob):
        wait_dropped_and_back(p)
        wait_online(p, ["alice", "bob"])  # presence rebuilt on the new primary
    say(alice, "back: nothing lost")
    say(bob, "and nothing twice")
    for p in (alice, bob):
        assert_exactly(wait_shown(p, len(sent)), sent)
    assert [r["ts"] for r in shown(alice)] == [r["ts"] for r in shown(bob)]
    if shot is not None:  # the room after the failover, as docs/web.md shows it
        alice.screenshot(path=str(shot))

    # bob closes his tab, misses two messages, and comes back to the room's history
    bob.context.close()
    wait_online(alice, ["alice"])
    say(alice, "bob, you missed this")
    say(alice, "and this")
    assert_exactly(wait_shown(alice, len(sent)), sent)
    bob = open_chat(browser, chat_url(site, "bob", broker, tokens["bob"]))
    wait_connected(bob)
    assert_exactly(wait_shown(bob, len(sent)), sent)
    for p in (alice, bob):
        wait_online(p, ["alice", "bob"])
    assert [r["ts"] for r in shown(alice)] == [r["ts"] for r in shown(bob)]


def test_two_pages_chat_through_a_primary_sigkill(
    browser: Any, static_site: Callable[[str], str], make_cluster: Callable[..., DevCluster]
) -> None:
    site = static_site("127.0.0.1")
    c = make_cluster(settings={"retention_s": 300.0, "allowed_origins": [site]})
    shot = os.environ.get("TRITONMQ_WEB_SCREENSHOT")  # docs/web-chat.png is made this way
    chat_through_a_failover(
        c, browser, site, {"alice": None, "bob": None}, Path(shot) if shot else None
    )


def mint(key_file: Path, sub: str) -> str:
    """A token as an operator makes one: `tritonmq token`."""
    out = subprocess.run(
        [*TRITONMQ, "token", "--key-file", str(key_file), "--sub", sub]
        + ["--pub", "chat.*", "--read", "chat.*", "--ttl", "600"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def test_the_same_over_wss_with_tokens(
    trusting_browser: Callable[[str], Any],
    static_site: Callable[[str], str],
    make_cluster: Callable[..., DevCluster],
    tmp_path: Path,
) -> None:
    key = tmp_path / "auth.key"
    key.write_text("browser-test-hs256-key-0123456789abcdef0123456789abcdef\n")
    site = static_site("127.0.0.1")
    c = make_cluster(
        tls=True,
        settings={
            "retention_s": 300.0,
            "allowed_origins": [site],
            "auth_required": True,
            "auth_key_file": str(key),
        },
    )
    assert all(u.startswith("wss://") for u in c.urls)
    assert c.ca_file is not None
    browser = trusting_browser(c.ca_file)  # the dev CA in chromium's NSS store: no bypass flag
    tokens: dict[str, str | None] = {"alice": mint(key, "alice"), "bob": mint(key, "bob")}
    chat_through_a_failover(c, browser, site, tokens, None)

    # without a token the broker answers UNAUTHENTICATED and the page says so
    anon = open_chat(browser, chat_url(site, "mallory", a_backup(c)))
    expect(anon.locator("#messages li.error").first).to_contain_text(
        "UNAUTHENTICATED", timeout=WAIT_MS
    )
    expect(anon.locator("#messages li.msg")).to_have_count(0)


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_broker_serves_the_page_and_the_client(
    tls: bool,
    browser: Any,
    trusting_browser: Callable[[str], Any],
    make_cluster: Callable[..., DevCluster],
    tmp_path: Path,
) -> None:
    """What a user does first: open a broker's own address. The page and the client come
    from the broker, which is then the page's origin (allowed by default, as same-origin)."""
    settings: dict[str, Any] = {"replicas": 1, "retention_s": 300.0}
    tokens: dict[str, str | None] = {"alice": None, "bob": None}
    if tls:
        key = tmp_path / "auth.key"
        key.write_text("browser-test-hs256-key-0123456789abcdef0123456789abcdef\n")
        settings |= {"auth_required": True, "auth_key_file": str(key)}
        tokens = {"alice": mint(key, "alice"), "bob": mint(key, "bob")}
    c = make_cluster(replicas=1, settings=settings, tls=tls)
    if tls:
        assert c.ca_file is not None
        browser = trusting_browser(c.ca_file)
    origin = c.urls[0].replace("ws", "http", 1)  # ws -> http, wss -> https
    assert origin.startswith("https://" if tls else "http://")

    def page_of(address: str) -> Any:
        page = browser.new_context().new_page()
        answer = page.goto(address)
        assert answer is not None and answer.status == 200
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        return page

    # alice follows a link with her name and room; bob types them into the form
    q = {"name": "alice", "room": ROOM} | ({"token": tokens["alice"]} if tls else {})
    alice = page_of(f"{origin}/?{urlencode(q)}")
    bob = page_of(f"{origin}/")
    expect(bob.locator("#state")).to_have_attribute("data-state", "idle")
    bob.fill("#name", "bob")
    bob.fill("#room", ROOM)
    if tls:
        bob.fill("#token", str(tokens["bob"]))
    bob.click("#join button")
    js = alice.evaluate(
        "async () => { const r = await fetch('/tritonmq.js');"
        " return [r.status, r.headers.get('content-type')]; }"
    )
    assert js == [200, "text/javascript; charset=utf-8"]
    for p in (alice, bob):
        wait_connected(p)
        wait_online(p, ["alice", "bob"])
    send(alice, "served by the broker itself")
    send(bob, "and so is the client")
    for p in (alice, bob):
        assert_exactly(wait_shown(p, 2), {"served by the broker itself", "and so is the client"})
    assert "token" not in alice.url  # a bearer credential does not stay in the address bar


def test_a_page_served_by_a_backup_reaches_the_primary(
    browser: Any, make_cluster: Callable[..., DevCluster]
) -> None:
    c = make_cluster(settings={"retention_s": 300.0})
    origin = a_backup(c).replace("ws", "http", 1)
    page = browser.new_context().new_page()
    page.goto(f"{origin}/?{urlencode({'name': 'alice', 'room': ROOM})}")
    # connected to the room's primary, another broker than the page's origin: presence
    # lists this page (the primary learns its cluster's brokers within seconds)
    expect(page.locator("#online li")).to_have_text(["alice"], timeout=30_000)


def refusals(c: DevCluster, origin: str) -> int:
    """How many handshakes from ``origin`` the brokers logged as refused."""
    return sum(
        b.log_path.read_text(errors="replace").count(
            f"refused a handshake from Origin {[origin]!r}"
        )
        for b in c.brokers.values()
    )


def test_a_page_from_a_disallowed_origin_is_refused(
    browser: Any, static_site: Callable[[str], str], make_cluster: Callable[..., DevCluster]
) -> None:
    allowed = static_site("127.0.0.1")
    other = static_site("127.0.0.2")  # another origin: what a hostile site would be
    c = make_cluster(replicas=1, settings={"replicas": 1, "allowed_origins": [allowed]})
    broker = c.urls[0]

    evil = open_chat(browser, chat_url(other, "eve", broker))
    wait_for(lambda: refusals(c, other) >= 1, 30, "the broker to refuse the page's handshake")
    expect(evil.locator("#state")).not_to_have_attribute("data-state", "connected")

    good = open_chat(browser, chat_url(allowed, "alice", broker))
    wait_connected(good)
    send(good, "only the allowed origin gets in")
    assert_exactly(wait_shown(good, 1), {"only the allowed origin gets in"})
    expect(evil.locator("#state")).not_to_have_attribute("data-state", "connected")
    expect(evil.locator("#messages li.msg")).to_have_count(0)
    assert refusals(c, allowed) == 0
