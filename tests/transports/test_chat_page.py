"""The chat page at / of `llmkit serve demo`, driven in headless Chromium through Playwright.

In CI (CI=true) a missing browser or playwright fails these tests; elsewhere they skip.
Screenshots go to test-artifacts/ at the repository root.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest
from serve_helpers import metric

import llmkit.cli.serve
import llmkit.transports.http
from llmkit.cli import main

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # checked by the browser fixture, which says what is missing
    sync_playwright = None

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"
KEY = "page-key"
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
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

    def done(self, request_id: str) -> list[str]:
        return [m["status"] for m in self.received if m["type"] == "done" and m["id"] == request_id]


def running(url: str) -> float:
    return metric(httpx.get(f"{url}/metrics", timeout=10).text, "llmkit:num_requests_running")


def ask(page: Page, text: str, max_tokens: int) -> None:
    page.get_by_label("Max tokens").fill(str(max_tokens))
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


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


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=path, full_page=True)
    print(f"screenshot: {path}")


@pytest.fixture(scope="module")
def demo(module_server):
    return module_server("demo", "--log-level", "warning")


def test_the_page_streams_keeps_the_conversation_and_stops(demo, browser):
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    frames = Frames(page)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    page.goto(demo.url + "/")
    expect(page.get_by_label("Model")).to_have_value("demo")
    expect(page.locator("#key-form")).to_be_hidden()
    # Its icon is its own, so a browser asks for no /favicon.ico.
    icon = httpx.get(urljoin(page.url, page.locator("link[rel=icon]").get_attribute("href")))
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    # Its noise is expected, and the page says so.
    expect(page.get_by_role("note")).to_contain_text("weights are random")

    ask(page, "Hello there", 64)
    seen = watch_reply(page)
    expect(page.get_by_role("status")).to_contain_text(
        re.compile(r"Done: \d+ tokens · [\d.]+ tokens/s")
    )
    first = page.locator(".message.assistant .text").last.text_content()
    # It grew in place: several observations, each a prefix of the next.
    grown = [text for text in seen if text]
    assert len(grown) >= 3, seen
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(grown))
    assert first.startswith(grown[-1]) and first
    request = frames.sent[0]
    assert request["type"] == "chat.completions.create"
    assert request["body"] == {
        "model": "demo",
        "messages": [{"role": "user", "content": "Hello there"}],
        "max_tokens": 64,
        "stream_options": {"include_usage": True},
    }
    assert frames.done(request["id"]) == ["finished"]
    streamed = "".join(
        m["data"]["choices"][0]["delta"].get("content") or ""
        for m in frames.received
        if m["type"] == "chunk" and m["id"] == request["id"] and m["data"]["choices"]
    )
    assert streamed == first

    ask(page, "And then?", 8)
    watch_reply(page)
    assert frames.sent[1]["body"]["messages"] == [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And then?"},
    ]

    ask(page, "Tell me a long story", 3000)
    reply = page.locator(".message.assistant .text").last
    expect(reply).not_to_have_text("")
    assert running(demo.url) == 1
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("status")).to_contain_text("Stopped:")
    long_id = frames.sent[2]["id"]
    assert {"type": "cancel", "id": long_id} in frames.sent
    deadline = time.monotonic() + 5
    while running(demo.url) != 0:
        assert time.monotonic() < deadline, "the stopped request is still running after 5 s"
        time.sleep(0.1)
    assert frames.done(long_id) == ["cancelled"]
    expect(page.get_by_role("button", name="Send")).to_be_enabled()

    # An error shows once, in the reply it ended.
    ask(page, "Too long", 10**6)
    error = page.locator(".message.assistant .error").last
    expect(error).to_contain_text("maximum context length")
    message = [m for m in frames.received if m["type"] == "error"][-1]["error"]["message"]
    assert page.locator("body").inner_text().count(message) == 1
    expect(page.get_by_role("status")).to_have_text("Failed.")
    assert failed == []
    screenshot(page, "chat_page.png")
    page.close()


def test_the_page_asks_for_the_key_and_then_works(module_server, browser):
    server = module_server("demo", "--api-key", KEY, "--log-level", "warning")
    assert httpx.get(server.url + "/").status_code == 200
    assert httpx.get(server.url + "/v1/models").status_code == 401
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    frames = Frames(page)
    # The handshake's headers, which only the DevTools protocol shows.
    handshake: dict[str, dict] = {}
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.on("Network.webSocketWillSendHandshakeRequest", lambda e: handshake.update(sent=e))
    cdp.on("Network.webSocketHandshakeResponseReceived", lambda e: handshake.update(got=e))
    page.goto(server.url + "/")
    key = page.get_by_label("API key")
    expect(key).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    key.fill("wrong")
    page.get_by_role("button", name="Use key").click()
    expect(page.locator("#key-help")).to_contain_text("refused")
    key.fill(KEY)
    page.get_by_role("button", name="Use key").click()
    expect(page.get_by_label("Model")).to_have_value("demo")
    expect(key).to_be_hidden()

    ask(page, "Hello", 16)
    watch_reply(page)
    expect(page.get_by_role("status")).to_contain_text("Done:")
    assert frames.done(frames.sent[0]["id"]) == ["finished"]
    # The key went as a subprotocol token; the server chose the plain protocol name.
    sent = {k.lower(): v for k, v in handshake["sent"]["request"]["headers"].items()}
    got = {k.lower(): v for k, v in handshake["got"]["response"]["headers"].items()}
    assert sent["sec-websocket-protocol"] == f"llmkit.json, llmkit.bearer.{KEY}"
    assert got["sec-websocket-protocol"] == "llmkit.json"
    assert frames.urls == [server.url.replace("http:", "ws:") + "/v1/ws"]
    assert page.evaluate("sessionStorage.getItem('llmkit.apiKey')") == KEY
    assert KEY not in page.url
    screenshot(page, "chat_page_with_key.png")
    page.close()


# A service with llmkit (and its page) mounted under /llm, as in
# examples/mount_in_fastapi_or_starlette.py.
MOUNTED_SERVICE = """
import contextlib, sys
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from llmkit import AsyncEngine, EngineConfig
from llmkit.transports.http import create_app

engine = AsyncEngine(EngineConfig(model=sys.argv[1]))

@contextlib.asynccontextmanager
async def lifespan(app):
    async with engine:
        yield

llm = create_app(engine, served_model_name="mounted", ui=True)
app = Starlette(routes=[Mount("/llm", app=llm)], lifespan=lifespan)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def test_the_page_works_under_a_prefix(start_process, tiny_model, tmp_path, browser):
    script = tmp_path / "service.py"
    script.write_text(MOUNTED_SERVICE)
    _, url = start_process(
        lambda port: [sys.executable, str(script), tiny_model, str(port)], "/llm/health"
    )
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    frames = Frames(page)
    page.goto(url + "/llm")
    assert page.url == url + "/llm/"
    expect(page.get_by_label("Model")).to_have_value("mounted")
    expect(page.get_by_role("note")).to_be_hidden()  # a model of the app's, not the demo
    ask(page, "Hello", 8)
    watch_reply(page)
    expect(page.get_by_role("status")).to_contain_text("Done:")
    assert frames.urls == [url.replace("http:", "ws:") + "/llm/v1/ws"]
    assert frames.done(frames.sent[0]["id"]) == ["finished"]
    page.close()


@pytest.mark.parametrize(("flags", "ui"), [((), True), (("--no-ui",), False)])
def test_serve_shows_the_page_unless_no_ui(flags, ui, monkeypatch):
    seen = {}

    class Started(Exception):
        pass

    def create_app(engine, **kwargs):
        seen.update(kwargs)
        raise Started

    monkeypatch.setattr(llmkit.cli.serve, "bind_sockets", lambda host, port, uds: [])
    monkeypatch.setattr(llmkit.cli.serve, "_served_engine", lambda args, config: (None, "demo"))
    monkeypatch.setattr(llmkit.transports.http, "create_app", create_app)
    with pytest.raises(Started):
        main(["serve", "demo", *flags])
    assert seen["ui"] is ui
