"""The chat page at / of `llmkit serve`, driven in headless Chromium through Playwright:
with an API key, mounted under a prefix, and left out with --no-ui.

What a person does with the page against `llmkit serve demo` is in test_chat_page_demo.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest
from tests.transports.http.page_helpers import (
    TIMEOUT_MS,
    Frames,
    ask,
    chromium,
    expect,
    screenshot,
    watch_reply,
)

import llmkit.cli.serve.command
import llmkit.transports.app
from llmkit.cli import main

if TYPE_CHECKING:
    from playwright.sync_api import Browser

KEY = "page-key"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from chromium()


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
    expect(page.locator("#model option")).to_have_text(["needs an API key"])
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
from llmkit.http import AppOptions, create_app

engine = AsyncEngine(EngineConfig(model=sys.argv[1]))

@contextlib.asynccontextmanager
async def lifespan(app):
    async with engine:
        yield

llm = create_app(engine, AppOptions(ui=True), served_model_name="mounted")
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

    def create_app(engine, options, **kwargs):
        seen["ui"] = options.ui
        raise Started

    monkeypatch.setattr(llmkit.cli.serve.command, "bind_sockets", lambda host, port, uds: [])
    monkeypatch.setattr(
        llmkit.cli.serve.command, "_served_engine", lambda args, config: (None, "demo")
    )
    monkeypatch.setattr(llmkit.transports.app, "create_app", create_app)
    with pytest.raises(Started):
        main(["serve", "demo", *flags])
    assert seen["ui"] is ui


def test_the_model_picker_says_each_models_state(process_tools, tiny_model, tmp_path, browser):
    """A server of several models: the picker lists them with their state, and a reply from
    one that was unloaded shows it loaded."""
    command = lambda port: [  # noqa: E731
        *process_tools.llmkit_command(), "serve", "--model", f"first={tiny_model}",
        "--model", f"second={tiny_model}", "--log-level", "warning", "--port", str(port),
    ]  # fmt: skip
    proc, url = process_tools.spawn(command, tmp_path / "serve.log")
    try:
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url + "/")
        options = page.locator("#model option")
        expect(options).to_have_text(["first (unloaded)", "second (unloaded)"])
        page.get_by_label("Model").select_option("second")
        ask(page, "Hello", 4)
        watch_reply(page)
        expect(page.get_by_role("status")).to_contain_text("Done:")
        expect(options).to_have_text(["first (unloaded)", "second (loaded)"])
    finally:
        process_tools.stop(proc)
