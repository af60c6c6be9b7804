"""Headless Chromium through Playwright for the chat page's tests, and what they share.

In CI (CI=true) a missing browser or playwright fails these tests; elsewhere they skip.
Screenshots go to test-artifacts/ at the repository root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deadlines import Deadline

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # chromium() says what is missing
    sync_playwright = expect = None

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).parents[3] / "test-artifacts"
TIMEOUT_MS = 60_000


def chromium() -> Iterator[Browser]:
    """One headless Chromium (the body of a browser fixture)."""
    missing = None
    if sync_playwright is None:
        missing = "the playwright package is not installed (pip install -e '.[test]')"
    elif not Path(CHROMIUM).exists():
        missing = f"no browser at {CHROMIUM} (apt-get install chromium)"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Frames:
    """The JSON messages the page sent and received over its WebSockets."""

    def __init__(self, page: Page):
        self.sent: list[dict] = []
        self.received: list[dict] = []
        self.urls: list[str] = []
        page.on("websocket", self._watch)

    def _watch(self, ws) -> None:
        self.urls.append(ws.url)
        ws.on("framesent", lambda payload: self.sent.append(json.loads(payload)))
        ws.on("framereceived", lambda payload: self.received.append(json.loads(payload)))

    def requests(self) -> list[dict]:
        return [m for m in self.sent if m["type"] == "chat.completions.create"]

    def done(self, request_id: str) -> list[str]:
        return [m["status"] for m in self.received if m["type"] == "done" and m["id"] == request_id]


class Problems:
    """Console errors, uncaught exceptions and failed requests of a page."""

    def __init__(self, page: Page):
        self.seen: list[str] = []
        page.on("console", lambda m: self.seen.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: self.seen.append(f"uncaught: {exc}"))
        page.on("requestfailed", lambda r: self.seen.append(f"failed: {r.url}"))
        page.on(
            "response",
            lambda r: self.seen.append(f"{r.status}: {r.url}") if r.status >= 400 else None,
        )


def ask(page: Page, text: str, max_tokens: int | None = None) -> None:
    if max_tokens is not None:
        open_side_panel(page)
        page.get_by_label("Max tokens").fill(str(max_tokens))
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def open_side_panel(page: Page) -> None:
    """On a narrow screen the settings are behind the Chats button."""
    menu = page.get_by_role("button", name="Chats")
    if menu.is_visible() and menu.get_attribute("aria-expanded") == "false":
        menu.click()


def watch_reply(page: Page) -> list[str]:
    """The last reply's text, read every 20 ms while it streams."""
    reply = page.locator(".message.assistant").last
    seen: list[str] = []
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while "streaming" in (reply.get_attribute("class") or ""):
        assert time.monotonic() < deadline, "the reply did not finish"
        text = reply.locator(".text").text_content() or ""
        if not seen or text != seen[-1]:
            seen.append(text)
        time.sleep(0.02)
    return seen


# The last reply's last line: inside the scrolled conversation and the window, and the
# element drawn there is the reply itself (nothing covers it).
NEWEST_IN_VIEW = """() => {
  const reply = [...document.querySelectorAll('.message.assistant')].at(-1);
  const box = reply.getBoundingClientRect();
  const view = document.getElementById('conversation').getBoundingClientRect();
  const y = box.bottom - 4;
  const seen = document.elementFromPoint(box.left + 8, y);
  return y > view.top && box.bottom <= view.bottom + 1 && box.bottom <= innerHeight
    && reply.contains(seen);
}"""


def newest_in_view(page: Page) -> bool:
    return page.evaluate(NEWEST_IN_VIEW)


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=path, full_page=True)
    print(f"screenshot: {path}")


def serve_on_port(port: int, log: Path) -> subprocess.Popen:
    """`llmkit serve demo` on ``port`` (a server that comes back where it was), once healthy."""
    command = [sys.executable, "-m", "llmkit.cli", "serve", "demo", "--port", str(port)]
    with log.open("a") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = Deadline(90, f"the server to come back on port {port}")
    while proc.poll() is None and not deadline.passed():
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{deadline.error()}; see {log}")
