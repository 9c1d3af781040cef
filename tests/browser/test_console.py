"""The web console (clients/console, served at ``/console``) in real chromium against real
2-group clusters.

What an operator would check: the page shows the groups with their primaries and ISR, and
the slot map; a slot moved from the page changes owner on the page once the groups'
primaries completed the move; a durable subscription reset and deleted from the page
changes (its lag, then its row) on the page. With tokens required, a token without the
``admin`` claim is refused (``FORBIDDEN`` shown as it came) and nothing changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tritonmq.devtools.cluster import DevCluster

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the install hint
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.browser

WAIT_MS = 45_000  # a slot move on a loaded 2-core machine: seal, handover, complete
TOPIC = "orders"
TRITONMQ = [sys.executable, "-m", "tritonmq"]

# Run in the page: publish, then leave a durable subscription behind with nothing consumed
# (its consumer gone, as an admin op requires), through the JavaScript client.
SEED = """async ([url, topic, token]) => {
  const { connect } = await import('/tritonmq.js');
  const client = await connect(url, token ? { token } : {});
  await client.publishBatch(topic, ['one', 'two', 'three', 'four', 'five']);
  const sub = await client.subscribe(topic, () => {}, { subscription: 'billing', from: 'latest' });
  sub.close();
  await client.close();
}"""


def console_of(browser: Any, c: DevCluster, token: str | None = None) -> Any:
    """The console as a broker of ``c`` serves it (a backup of g1: any broker will do)."""
    origin = c.urls[-1].replace("ws", "http", 1)
    q = {"interval": "700"} | ({"token": token} if token else {})
    page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    answer = page.goto(f"{origin}/console?{urlencode(q)}")
    assert answer is not None and answer.status == 200
    return page


def wait_groups(page: Any, c: DevCluster) -> None:
    """Each group's row names the primary ZooKeeper names, and its ISR."""
    for g in c.groups:
        row = page.locator(f'#groups tr[data-group="{g}"]')
        expect(row).to_have_attribute("data-primary", c.primary(g) or "", timeout=WAIT_MS)
        expect(row).not_to_have_attribute("data-isr", "", timeout=WAIT_MS)


def a_slot_to_move(page: Any, frm: str) -> int:
    """A slot of ``frm`` other than TOPIC's (its subscription stays where it is)."""
    count = page.locator("#slots .slot").count()
    busy = zlib.crc32(TOPIC.encode()) % count
    owners = page.eval_on_selector_all("#slots .slot", "els => els.map(e => e.dataset.owner)")
    return next(n for n, g in enumerate(owners) if g == frm and n != busy)


def move_from_the_page(page: Any, slot: int, to: str) -> None:
    page.locator(f'#slots .slot[data-slot="{slot}"]').click()
    expect(page.locator("#move-slot")).to_have_value(str(slot))
    page.select_option("#move-to", to)
    page.click("#move-button")


def notice(page: Any, kind: str) -> Any:
    n = page.locator("#notice")
    expect(n).to_have_attribute("data-kind", kind, timeout=WAIT_MS)
    return n


def sub_row(page: Any) -> Any:
    return page.locator(f'#subscriptions tr[data-topic="{TOPIC}"][data-subscription="billing"]')


def act_on_subscription(page: Any, action: str) -> None:
    """Press the row's button, see the dry run's question, confirm it."""
    sub_row(page).locator(f'button[data-action="{action}"]').click()
    notice(page, "ask")
    page.click("#confirm")
    notice(page, "ok")


def shoot(page: Any, tmp_path: Path, name: str) -> None:
    """A screenshot beside the test's files; copied to docs/img when asked (docs/web.md's
    are made this way: TRITONMQ_CONSOLE_SCREENSHOTS=docs/img)."""
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    if out := os.environ.get("TRITONMQ_CONSOLE_SCREENSHOTS"):
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(out) / name)


def test_the_console_shows_the_cluster_and_its_actions_change_it(
    browser: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    c = make_cluster(groups=2, replicas=2, settings={"retention_s": 300.0})
    page = console_of(browser, c)
    wait_groups(page, c)
    expect(page.locator("#mode")).to_have_attribute("data-mode", "anonymous")
    expect(page.locator("#mode")).to_contain_text("anyone who can reach it may take these actions")
    expect(page.locator("#slots .slot")).to_have_count(64)
    assert {page.locator(".slot").nth(n).get_attribute("data-owner") for n in range(2)} == {
        "g1",
        "g2",
    }

    page.evaluate(SEED, [c.urls[0], TOPIC, None])
    row = sub_row(page)
    expect(row).to_have_attribute("data-lag", "0", timeout=WAIT_MS)
    expect(page.locator(f'#topics tr[data-topic="{TOPIC}"]')).to_be_visible()

    # a slot of g1 moves to g2, driven from the page; the page sees its owner change
    slot = a_slot_to_move(page, "g1")
    move_from_the_page(page, slot, "g2")
    expect(notice(page, "ok")).to_contain_text(f"slot {slot}: moving from g1 to g2")
    cell = page.locator(f'#slots .slot[data-slot="{slot}"]')
    expect(cell).to_have_attribute("data-owner", "g2", timeout=WAIT_MS)
    expect(cell).to_have_attribute("data-state", "normal", timeout=WAIT_MS)
    expect(page.locator("#events")).to_contain_text(f"slot {slot}: now owned by g2 (era 1)")

    # moving it again to where it is now is refused, typed
    move_from_the_page(page, slot, "g2")
    expect(notice(page, "error")).to_have_attribute("data-code", "BAD_REQUEST")

    # reset to earliest: everything retained is waiting again
    act_on_subscription(page, "earliest")
    expect(row).to_have_attribute("data-lag", "5", timeout=WAIT_MS)
    expect(page.locator("#events")).to_contain_text("reset billing of orders to earliest")
    shoot(page, tmp_path, "console.png")

    act_on_subscription(page, "delete")
    expect(row).to_have_count(0, timeout=WAIT_MS)


def mint(key_file: Path, sub: str, *claims: str) -> str:
    """A token as an operator makes one: `tritonmq token`."""
    out = subprocess.run(
        [*TRITONMQ, "token", "--key-file", str(key_file), "--sub", sub, "--ttl", "600", *claims],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def test_a_token_without_the_admin_claim_is_refused_and_nothing_changes(
    browser: Any, make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    key = tmp_path / "auth.key"
    key.write_text("browser-test-hs256-key-0123456789abcdef0123456789abcdef\n")
    settings = {"replicas": 1, "auth_required": True, "auth_key_file": str(key)}
    c = make_cluster(groups=2, replicas=1, settings=settings)
    everything = ("--pub", "*", "--read", "*", "--names", "*")
    bob = mint(key, "bob", *everything)
    root = mint(key, "root", *everything, "--admin")

    page = console_of(browser, c, bob)
    wait_groups(page, c)  # meta needs only a principal
    expect(page.locator("#mode")).to_have_attribute("data-mode", "reader")
    page.evaluate(SEED, [c.urls[0], TOPIC, bob])
    slot = a_slot_to_move(page, "g1")
    move_from_the_page(page, slot, "g2")
    n = notice(page, "error")
    expect(n).to_have_attribute("data-code", "FORBIDDEN")
    expect(n).to_contain_text(f"'bob' may not move slot {slot}")
    # the page lists no subscription for bob (stats is an admin's): ask as the page would
    refused = page.evaluate(
        """async ([url, token]) => {
          const { BrokerConnection } = await import('/tritonmq.js');
          const conn = new BrokerConnection(url, { token });
          try { await conn.resetSubscription('orders', 'billing', 'earliest', { execute: true }); }
          catch (e) { return [e.code, e.message]; } finally { conn.close(); }
        }""",
        [c.urls[0], bob],
    )
    assert refused is not None and refused[0] == "FORBIDDEN", refused
    shoot(page, tmp_path, "console-forbidden.png")

    # the same page with the admin's token: the move goes through, the subscription is there
    page.fill("#token", root)
    page.click("#auth button")
    expect(page.locator("#mode")).to_have_attribute("data-mode", "admin", timeout=WAIT_MS)
    expect(sub_row(page)).to_have_attribute("data-lag", "0", timeout=WAIT_MS)
    cell = page.locator(f'#slots .slot[data-slot="{slot}"]')
    expect(cell).to_have_attribute("data-owner", "g1")
    move_from_the_page(page, slot, "g2")
    notice(page, "ok")
    expect(cell).to_have_attribute("data-owner", "g2", timeout=WAIT_MS)
