"""`auto` content format: a template that loops over a message's content reads parts."""

from __future__ import annotations

import pytest

from llmkit.protocol.openai import ChatMessage
from llmkit.serving.conversation import template_content_format, to_conversation


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% for m in messages %}{{ m['content'] }}{% endfor %}", "string"),
        ("{% for m in messages %}{{ m.content | trim }}{% endfor %}", "string"),
        (
            "{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}"
            "{% endfor %}",
            "openai",
        ),
        (
            "{% for m in messages %}{% for p in m.content | selectattr('type') %}{{ p.text }}"
            "{% endfor %}{% endfor %}",
            "openai",
        ),
        (
            "{% for m in messages %}{% set c = m['content'] %}{% for p in c %}{{ p }}{% endfor %}"
            "{% endfor %}",
            "openai",
        ),
        ("{% for m in messages %", "string"),
    ],
)
def test_template_content_format(template, expected):
    assert template_content_format(template) == expected


def test_conversation_formats():
    messages = [
        ChatMessage(
            role="user", content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
        ),
        ChatMessage(role="assistant", content="c"),
    ]
    assert [m["content"] for m in to_conversation(messages, "string")] == ["a\nb", "c"]
    assert [m["content"] for m in to_conversation(messages, "openai")] == [
        [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        [{"type": "text", "text": "c"}],
    ]
