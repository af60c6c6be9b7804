"""The chat page against a hostile reply, in headless Chromium: the reply's markup never
reaches the DOM unsanitized, at any moment of its stream (the page's CSP reports every
attempt, through a listener registered before anything renders); editing a question
replaces it. The WebSocket is answered by the test (Playwright's routing): no model writes
such a reply on demand."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from tests.transports.http.page_helpers import TIMEOUT_MS, ask, chromium, expect

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, WebSocketRoute

HOSTILE = (
    "Look: <img src=x onerror=\"window.pwned='img'\"> and "
    "<script>window.pwned='script'</script> "
    "[a link](javascript:window.pwned='link') "
    "<svg onload=\"window.pwned='svg'\"><circle r=1 /></svg> "
    '<a href="javascript:window.pwned=1">raw</a> <div class="message user">fake</div> **bold**'
)
# Every violation the page's CSP reports, kept from before the first script of the page.
CSP_HOOK = """
window.violations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.violations.push(`${e.effectiveDirective} at ${e.sourceFile}:${e.lineNumber}`));
"""
UNSAFE_DOM = """() => [...document.querySelectorAll('*')].flatMap((node) => [
  ...[...node.attributes].filter((a) => a.name.startsWith('on') ||
     /^\\s*javascript:/i.test(a.value)).map((a) => `${node.tagName} ${a.name}=${a.value}`),
  ...(node.tagName === 'SCRIPT' && node.closest('#conversation') ? ['a script'] : []),
])"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from chromium()


def chunk(rid: str, **delta: str) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": None}
    data = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "demo"}
    return json.dumps({"type": "chunk", "id": rid, "data": {**data, "choices": [choice]}})


def hostile_server(ws: WebSocketRoute) -> None:
    """Answers each chat request with HOSTILE as reasoning, then as the reply, 5
    characters a chunk (so a half-written tag is rendered too), then done."""

    def answer(frame: str | bytes) -> None:
        message = json.loads(frame)
        if message["type"] != "chat.completions.create":
            return
        rid = message["id"]
        for kind in ("reasoning_content", "content"):
            for i in range(0, len(HOSTILE), 5):
                ws.send(chunk(rid, **{kind: HOSTILE[i : i + 5]}))
        ws.send(json.dumps({"type": "done", "id": rid, "status": "finished"}))

    ws.on_message(answer)


def open_page(browser: Browser, url: str) -> Page:
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.add_init_script(CSP_HOOK)
    page.route_web_socket(re.compile(r".*/v1/ws$"), hostile_server)
    page.goto(url + "/")
    expect(page.get_by_label("Model")).to_have_value("demo")
    return page


def assert_safe(page: Page) -> None:
    assert page.evaluate("window.violations") == []
    assert page.evaluate(UNSAFE_DOM) == []
    assert page.evaluate("window.pwned") is None


def test_a_hostile_reply_never_reaches_the_dom_unsanitized(module_server, browser):
    server = module_server("demo", "--log-level", "warning")
    page = open_page(browser, server.url)
    ask(page, HOSTILE)  # the question (and so the title) holds it too
    expect(page.get_by_role("status")).to_contain_text("Done:")
    reply = page.locator(".message.assistant").last
    expect(reply.locator(".text strong")).to_have_text("bold")
    expect(reply.locator(".reasoning-text")).to_contain_text("<script>")  # as text
    expect(page.locator(".message.user .text").first).to_have_text(HOSTILE)
    assert_safe(page)
    # Every prefix of the reply, as the stream shows them, through the page's renderer.
    page.evaluate(
        """async (text) => {
        const { renderMarkdown } = await import('/ui/markdown.js');
        const box = document.createElement('div');
        document.body.append(box);
        for (let i = 1; i <= text.length; i++) renderMarkdown(box, text.slice(0, i));
        await new Promise((done) => setTimeout(done, 100));  // handlers would have fired
        box.remove();
    }""",
        HOSTILE,
    )
    assert_safe(page)
    page.reload()  # the stored conversation, drawn again from storage
    expect(page.locator(".message.assistant .text strong")).to_have_text("bold")
    assert_safe(page)
    page.close()


def test_editing_the_last_question_replaces_it(module_server, browser):
    server = module_server("demo", "--log-level", "warning")
    page = open_page(browser, server.url)
    for question in ("first question", "second question"):
        ask(page, question)
        expect(page.locator(".message.assistant:not(.streaming)")).to_have_count(
            1 if question.startswith("first") else 2
        )
    page.reload()  # the conversation as stored
    page.locator(".message.user").last.get_by_role("button", name="Edit").click()
    box = page.get_by_label("Message")
    expect(box).to_have_value("second question")
    expect(page.locator(".message.user .text")).to_have_text(["first question"])
    box.fill("third question")
    box.press("Enter")
    expect(page.locator(".message.assistant:not(.streaming)")).to_have_count(2)
    expect(page.locator(".message.user .text")).to_have_text(["first question", "third question"])
    page.reload()
    expect(page.locator(".message.user .text")).to_have_text(["first question", "third question"])
    page.close()
