"""The chat page as a person uses it, against one `llmkit serve demo`, in one Chromium.

The server logs its requests' prompts and sampling parameters, so what the page's settings
did is checked where it counts: on the server. The last test stops the server and starts
it again on the same port.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from tests.transports.http.page_helpers import (
    TIMEOUT_MS,
    Frames,
    Problems,
    ask,
    chromium,
    expect,
    newest_in_view,
    screenshot,
    serve_on_port,
    watch_reply,
)

from serve_helpers import metric

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

# What the markdown test forces the demo model to answer, through a choice: reasoning
# (the server runs the qwen3 parser: only an answer that opens with <think> has any) and
# markdown.
REASONING = "Lists and tables help."
MARKDOWN = (
    "Steps:\n\n- first\n- second\n\n```python\nprint('copied')\n```\n\n"
    "| name | value |\n| --- | --- |\n| a | 1 |\n\n"
    '<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>'
)


@pytest.fixture(scope="module")
def demo(module_server):
    return module_server(
        "demo", "--reasoning-parser", "qwen3", "--log-prompts", "--log-level", "info"
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from chromium()


@pytest.fixture
def context(browser) -> Iterator[BrowserContext]:
    """A fresh profile (its own localStorage), 1000x800, that may use the clipboard."""
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    context.set_default_timeout(TIMEOUT_MS)
    yield context
    context.close()


def opened(context: BrowserContext, url: str) -> tuple[Page, Frames]:
    """The page, connected, and what goes over its socket."""
    page = context.new_page()
    frames = Frames(page)
    page.goto(url + "/")
    expect(page.locator("#connection")).to_have_text("connected")
    return page, frames


def running(url: str) -> float:
    return metric(httpx.get(f"{url}/metrics", timeout=10).text, "llmkit:num_requests_running")


def logged_requests(demo) -> list[str]:
    return [line for line in demo.log.read_text().splitlines() if "prompt=" in line]


def test_the_page_loads_clean_says_demo_and_fits_a_phone(demo, browser):
    context = browser.new_context(viewport={"width": 375, "height": 700})
    page = context.new_page()
    problems = Problems(page)
    page.goto(demo.url + "/")
    expect(page.locator("#connection")).to_have_text("connected")
    expect(page.get_by_label("Model")).to_have_value("demo")
    # Its noise is expected, and the page says so.
    expect(page.get_by_role("note")).to_contain_text("noise, by design")
    expect(page.get_by_label("Attach image")).to_be_hidden()  # a text-only model
    # Its icon is its own; /favicon.ico answers too, for browsers that ask anyway.
    icon = httpx.get(urljoin(page.url, page.locator("link[rel=icon]").get_attribute("href")))
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert httpx.get(demo.url + "/favicon.ico").status_code == 200
    ask(page, "Hello there", 24)  # the settings are in the side panel, opened by Chats
    expect(page.get_by_label("System prompt")).to_be_visible()  # it fits too
    watch_reply(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    assert page.evaluate("document.body.scrollWidth") <= 375
    assert problems.seen == []
    screenshot(page, "chat_page_375.png")
    context.close()


def test_the_page_streams_stops_and_shows_errors(demo, context):
    page, frames = opened(context, demo.url)
    ask(page, "Hello there", 64)
    seen = watch_reply(page)
    expect(page.get_by_role("status")).to_contain_text(
        re.compile(r"Done: \d+ tokens · [\d.]+ tokens/s")
    )
    # It grew in place while it streamed.
    grown = [text for text in seen if text]
    assert len(grown) >= 3, seen
    assert all(len(b) >= len(a) for a, b in itertools.pairwise(grown))
    request = frames.requests()[0]
    assert request["body"] == {
        "model": "demo",
        "messages": [{"role": "user", "content": "Hello there"}],
        "max_tokens": 64,
        "stream_options": {"include_usage": True},
    }
    assert frames.done(request["id"]) == ["finished"]
    first = "".join(
        m["data"]["choices"][0]["delta"].get("content") or ""
        for m in frames.received
        if m["type"] == "chunk" and m["id"] == request["id"] and m["data"]["choices"]
    )

    ask(page, "And then?", 8)
    watch_reply(page)
    assert frames.requests()[1]["body"]["messages"] == [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And then?"},
    ]

    ask(page, "Tell me a long story", 3000)
    reply = page.locator(".message.assistant").last
    expect(reply.locator(".text")).not_to_have_text("")
    assert running(demo.url) == 1
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("status")).to_contain_text("Stopped:")
    # The reply itself says it was stopped.
    expect(reply.locator(".note")).to_have_text("stopped")
    long_id = frames.requests()[2]["id"]
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
    screenshot(page, "chat_page.png")


def test_the_newest_reply_stays_in_view(demo, context):
    page, _ = opened(context, demo.url)
    for turn in range(10):
        ask(page, f"Question {turn}: tell me more", 24 if turn < 9 else 400)
        if turn < 9:
            watch_reply(page)
            assert newest_in_view(page), f"turn {turn}"
    # While the last reply streams, its newest line stays in view ...
    reply = page.locator(".message.assistant").last
    expect(reply.locator(".text")).not_to_have_text("")
    for _ in range(10):
        assert newest_in_view(page)
        time.sleep(0.05)
    # ... until the reader scrolls up: then the view stays, and a button leads back.
    page.locator("#conversation").hover()
    page.mouse.wheel(0, -3000)
    jump = page.get_by_role("button", name="Jump to newest")
    expect(jump).to_be_visible()
    top = page.evaluate("document.getElementById('conversation').scrollTop")
    time.sleep(0.3)
    assert page.evaluate("document.getElementById('conversation').scrollTop") == top
    jump.click()
    expect(jump).to_be_hidden()
    assert newest_in_view(page)
    page.get_by_role("button", name="Stop").click()
    expect(reply.locator(".note")).to_have_text("stopped")
    assert newest_in_view(page)
    assert len(page.locator(".message.assistant").all()) == 10


def with_requests_changed(page: Page, url: str, change: dict) -> None:
    """Open the page with ``change`` merged into each request's body on its way out."""

    def route(ws):
        server = ws.connect_to_server()

        def to_server(message):
            data = json.loads(message)
            if data.get("type") == "chat.completions.create":
                data["body"].update(change)
            server.send(json.dumps(data))

        ws.on_message(to_server)

    page.route_web_socket(re.compile(r"/v1/ws$"), route)
    page.goto(url + "/")
    expect(page.locator("#connection")).to_have_text("connected")


def test_a_markdown_answer_renders_with_its_reasoning_and_runs_nothing(demo, context):
    page = context.new_page()
    # The answer forced with structured output.
    answer = f"<think>{REASONING}</think>{MARKDOWN}"
    with_requests_changed(
        page, demo.url, {"structured_outputs": {"choice": [answer]}, "max_tokens": 200}
    )
    ask(page, "Show me markdown")
    watch_reply(page)
    reply = page.locator(".message.assistant").last
    # The reasoning has a block of its own, which folds away.
    reasoning = reply.locator("details.reasoning")
    expect(reasoning.locator(".reasoning-text")).to_have_text(REASONING)
    reasoning.locator("summary").click()
    expect(reasoning.locator(".reasoning-text")).to_be_hidden()
    expect(reply.locator(".text ul > li")).to_have_text(["first", "second"])
    expect(reply.locator(".text table td")).to_have_text(["a", "1"])
    expect(reply.locator(".text pre code")).to_have_text("print('copied')\n")
    reply.get_by_role("button", name="Copy code").click()
    assert page.evaluate("navigator.clipboard.readText()") == "print('copied')\n"
    # The whole answer copies as the markdown it came as.
    reply.locator(".message-actions").get_by_role("button", name="Copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == MARKDOWN
    # The HTML in the answer is kept inert: no handler, no script, nothing ran.
    assert reply.locator("script, [onerror]").count() == 0
    assert page.evaluate("window.pwned") is None
    screenshot(page, "chat_page_markdown.png")


def test_a_tool_call_shows_as_a_call(demo, context):
    page = context.new_page()
    city = {"type": "string", "enum": ["Paris"]}
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": city}, "required": ["city"]},
        },
    }
    # A named tool_choice: the model must call it (its arguments follow the schema).
    choice = {"type": "function", "function": {"name": "get_weather"}}
    with_requests_changed(page, demo.url, {"tools": [tool], "tool_choice": choice})
    ask(page, "What is the weather in Paris?")
    watch_reply(page)
    call = page.locator(".message.assistant").last.locator(".tool-call")
    expect(call).to_have_text(re.compile(r'^get_weather\(\{\s*"city"\s*:\s*"Paris"\s*\}\)$'))


def test_conversations_are_kept_and_switched(demo, context):
    page, _ = opened(context, demo.url)
    ask(page, "First conversation", 8)
    watch_reply(page)
    first_answer = page.locator(".message.assistant .text").last.inner_text()
    page.reload()
    expect(page.locator("#connection")).to_have_text("connected")
    expect(page.locator(".message.user .text")).to_contain_text(["First conversation"])
    assert page.locator(".message.assistant .text").last.inner_text() == first_answer

    page.get_by_role("button", name="New chat").click()
    expect(page.locator(".message")).to_have_count(0)
    ask(page, "Second conversation", 8)
    watch_reply(page)
    chats = page.locator("#conversations .open")
    expect(chats).to_have_text(["Second conversation", "First conversation"])
    chats.nth(1).click()
    expect(page.locator(".message.user .text")).to_have_text(["First conversation"])
    page.reload()
    expect(page.locator(".message.user .text")).to_have_text(["First conversation"])
    page.locator("#conversations .open").nth(0).click()
    expect(page.locator(".message.user .text")).to_have_text(["Second conversation"])
    # Export: every conversation, as JSON.
    with page.expect_download() as download:
        page.get_by_role("button", name="Export as JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert [c["messages"][0]["content"] for c in exported] == [
        "Second conversation",
        "First conversation",
    ]
    page.once("dialog", lambda dialog: dialog.accept("Renamed"))
    page.get_by_role("button", name="Rename First conversation").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Second conversation").click()
    expect(page.locator("#conversations .open")).to_have_text(["Renamed"])
    expect(page.locator(".message.user .text")).to_have_text(["First conversation"])


def test_settings_reach_the_request_and_are_kept(demo, context):
    page, _ = opened(context, demo.url)
    page.get_by_label("System prompt").fill("You answer like a pirate.")
    page.get_by_label("Temperature").fill("0.3")
    page.get_by_label("Top p").fill("0.7")
    page.get_by_label("Max tokens").fill("5")
    page.reload()
    expect(page.get_by_label("Temperature")).to_have_value("0.3")
    before = len(logged_requests(demo))
    ask(page, "Where is the treasure?")
    watch_reply(page)
    deadline = time.monotonic() + 5
    while len(logged_requests(demo)) == before:
        assert time.monotonic() < deadline, "the server logged no request"
        time.sleep(0.05)
    line = logged_requests(demo)[-1]
    assert "{'role': 'system', 'content': 'You answer like a pirate.'}, " in line
    assert "{'role': 'user', 'content': 'Where is the treasure?'}]" in line
    assert "temperature=0.3," in line and "top_p=0.7," in line and "max_tokens=5," in line


def test_edit_and_regenerate_replace_the_last_answer(demo, context):
    page, frames = opened(context, demo.url)
    ask(page, "A question", 16)
    watch_reply(page)
    ask(page, "A question with a typo", 16)
    watch_reply(page)
    last = page.locator(".message.user").last
    last.get_by_role("button", name="Edit").click()
    expect(page.get_by_label("Message")).to_have_value("A question with a typo")
    ask(page, "A question, corrected")
    watch_reply(page)
    expect(page.locator(".message.user .text")).to_have_text(
        ["A question", "A question, corrected"]
    )
    expect(page.locator(".message.assistant")).to_have_count(2)
    assert frames.requests()[-1]["body"]["messages"][-1] == {
        "role": "user",
        "content": "A question, corrected",
    }
    # Regenerate asks the same conversation again; its answer takes the old one's place.
    page.get_by_label("Temperature").fill("1.5")  # so the new answer differs
    page.locator(".message.assistant").last.get_by_role("button", name="Regenerate").click()
    watch_reply(page)
    expect(page.locator(".message.assistant")).to_have_count(2)
    again = frames.requests()[-1]["body"]
    assert again["messages"] == frames.requests()[-2]["body"]["messages"]
    reply = frames.requests()[-1]["id"]
    answer = "".join(
        m["data"]["choices"][0]["delta"].get("content") or ""
        for m in frames.received
        if m["type"] == "chunk" and m["id"] == reply and m["data"]["choices"]
    )
    stored = page.evaluate(
        "JSON.parse(localStorage.getItem('llmkit.conversations'))[0].messages.at(-1).content"
    )
    assert stored == answer


# A bare page of the test's own, importing only the client module. It is written into a
# document the server sent (its /health answer), so that it has the server's origin and
# address, as an app's page on that server would.
BARE_PAGE = """<!doctype html><title>bare</title>
<script type="module">
import { LlmkitClient } from "/ui/llmkit-ws.js";
window.client = new LlmkitClient({ url: "/v1/ws" });
window.states = [];
client.addEventListener("state", (e) => states.push(e.detail));
window.collect = async (stream) => {
  let text = "";
  try {
    for await (const delta of stream) text += delta.content ?? "";
  } catch (err) {
    return { text, status: stream.status, error: { message: err.message, param: err.param } };
  }
  return { text, status: stream.status };
};
window.ready = true;
</script>"""


def bare_page(context: BrowserContext, url: str) -> Page:
    page = context.new_page()
    page.goto(url + "/health")
    page.set_content(BARE_PAGE)
    page.wait_for_function("window.ready === true")
    return page


def test_the_client_module_multiplexes_cancels_and_reports_errors(demo, context):
    page = bare_page(context, demo.url)
    frames = Frames(page)
    result = page.evaluate(
        """async () => {
      const ask = (text, max_tokens) => client.chat(
        { model: "demo", messages: [{ role: "user", content: text }], max_tokens });
      const one = ask("one", 40), two = ask("two", 3000);
      const bad = client.chat({ model: "demo", messages: [], max_tokens: 5 });
      const [first, badResult] = await Promise.all([collect(one), collect(bad)]);
      two.cancel();
      const second = await collect(two);
      return { first, second, bad: badResult, states: states.map((s) => s.state) };
    }"""
    )
    assert result["first"]["status"] == "finished" and result["first"]["text"]
    assert result["second"]["status"] == "cancelled"
    assert result["bad"]["status"] == "failed"
    assert result["bad"]["error"]["param"] == "messages"
    assert result["states"] == ["connecting", "open"]
    # One socket carried all three.
    assert len(frames.urls) == 1
    assert [m["type"] for m in frames.sent] == ["chat.completions.create"] * 3 + ["cancel"]


def test_the_page_and_the_client_see_the_server_go_and_come_back(demo, context):
    page, _ = opened(context, demo.url)
    bare = bare_page(context, demo.url)
    bare.evaluate("client.connect()")
    bare.wait_for_function("client.state === 'open'")
    port = urlsplit(demo.url).port
    demo.proc.terminate()
    # The idle page notices at once (within 5 s), and says why.
    expect(page.locator("#connection")).to_have_text("disconnected", timeout=5000)
    expect(page.get_by_role("status")).to_contain_text("shutting down")
    closed = bare.evaluate("states.at(-1)")
    assert closed["state"] == "closed" and closed["shuttingDown"] is True
    assert closed["reason"] == "the server is shutting down"
    # It comes back: the page finds it again by itself.
    demo.proc.wait(30)
    again = serve_on_port(port, demo.log)
    try:
        expect(page.locator("#connection")).to_have_text("connected", timeout=10_000)
        ask(page, "Still there?", 8)
        watch_reply(page)
        expect(page.get_by_role("status")).to_contain_text("Done:")
    finally:
        again.terminate()
        again.wait(30)
