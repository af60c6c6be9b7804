"""schemathesis hooks for test_openapi_fuzz: the rules /openapi.json states only in words.

JSON Schema cannot say that a prompt's tokens plus max_tokens fit the context, that
best_of equals n (with beam search: is at least n), or that a regex compiles; the document
says so in its descriptions. A schema-valid (positive) case is brought within those rules
here before it is sent, the way a client that read the document would send it; negative
cases go as generated. Loaded by `st run` through SCHEMATHESIS_HOOKS, with the server in
FUZZ_URL (and its key, if any, in FUZZ_KEY).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import httpx
import schemathesis

_URL = os.environ.get("FUZZ_URL", "")
_KEY = os.environ.get("FUZZ_KEY")
_HEADERS = {"Authorization": f"Bearer {_KEY}"} if _KEY else {}
# A constraint of each kind that the structured-output backend compiles.
_VALID = {"json": {"type": "object"}, "regex": "a+", "grammar": 'start: "a"'}


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, dict):
        return case
    repair = _REPAIRS.get(case.path)
    if repair is not None:
        repair(case.body)
    return case


def _tokens(body: dict[str, Any]) -> int | None:
    """A prompt's length in tokens as the server counts it (None: it would not say)."""
    with httpx.Client(base_url=_URL, headers=_HEADERS, timeout=30) as http:
        response = http.post("/tokenize", json=body)
    return response.json()["count"] if response.status_code == 200 else None


@functools.cache
def _context() -> int:
    with httpx.Client(base_url=_URL, headers=_HEADERS, timeout=30) as http:
        return int(http.get("/v1/models").json()["data"][0]["max_model_len"])


def _fit_completion(body: dict[str, Any], prompt_tokens: int, default: int | None) -> None:
    """max_tokens (and min_tokens) within what the context leaves after the prompt."""
    room = _context() - prompt_tokens
    for name in ("max_tokens", "max_completion_tokens"):
        if body.get(name) is not None:
            body[name] = min(body[name], room)
    if default is not None and default > room and "max_tokens" not in body:
        body["max_tokens"] = room  # the default would not fit after this prompt
    chosen = body.get("max_completion_tokens") or body.get("max_tokens", default)
    if body.get("min_tokens") is not None:
        body["min_tokens"] = min(body["min_tokens"], chosen if chosen is not None else room)


def _fit_constraint(body: dict[str, Any]) -> None:
    constraint = body.get("structured_outputs")
    if isinstance(constraint, dict):
        for kind, valid in _VALID.items():
            if constraint.get(kind) is not None:
                constraint[kind] = valid
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and isinstance(response_format.get("json_schema"), dict):
        response_format["json_schema"]["schema"] = _VALID["json"]


def _completions(body: dict[str, Any]) -> None:
    if body.get("best_of") is not None:
        # Equal to n (with use_beam_search: at least n, which the document bounds alike).
        body["best_of"] = body.get("n", 1)
    prompt = body["prompt"]
    prompts = [prompt] if isinstance(prompt, str) or isinstance(prompt[0], int) else prompt
    context = _context()
    counts = []
    for i, one in enumerate(prompts):
        count = len(one) if isinstance(one, list) else _tokens({"prompt": one})
        if count is None or count >= context:
            prompts[i] = one[:1] if isinstance(one, list) else ""
            count = 1
        counts.append(count)
    if isinstance(prompt, str) or isinstance(prompt[0], int):
        body["prompt"] = prompts[0]
    _fit_completion(body, max(counts), default=16)
    _fit_constraint(body)


def _template_rules(body: dict[str, Any]) -> None:
    body.pop("chat_template", None)  # the document asks for a template that renders
    final = body["messages"][-1]
    if body.get("continue_final_message") and final.get("content") is None:
        body["continue_final_message"] = False


def _chat(body: dict[str, Any]) -> None:
    _template_rules(body)
    if body.get("top_logprobs") is not None:
        body["logprobs"] = True
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    names = {tool["function"]["name"] for tool in tools}
    if isinstance(choice, dict) and choice["function"]["name"] not in names:
        body["tool_choice"] = "none"
    elif choice == "required" or isinstance(choice, dict):
        for tool in tools:
            tool["function"]["parameters"] = _VALID["json"]
    _fit_constraint(body)
    count = _chat_prompt_tokens(body)
    if count is None or count >= _context():
        # Too long to fit: one short message and no tools instead.
        body["messages"] = [{"role": "user", "content": ""}]
        body["continue_final_message"] = False
        body["tools"] = body["tool_choice"] = None
        count = _chat_prompt_tokens(body) or 1
    _fit_completion(body, count, default=None)


def _chat_prompt_tokens(body: dict[str, Any]) -> int | None:
    """The rendered messages' length in tokens, tools included: /tokenize's count."""
    keys = (
        "messages",
        "add_generation_prompt",
        "continue_final_message",
        "chat_template_kwargs",
        "tools",
    )
    return _tokens({key: body.get(key) for key in keys if key in body})


def _tokenize(body: dict[str, Any]) -> None:
    if body.get("messages"):
        _template_rules(body)


def _embeddings(body: dict[str, Any]) -> None:
    texts = body["input"]
    texts = [texts] if isinstance(texts, str) or isinstance(texts[0], int) else texts
    context = _context()
    too_long = any(
        (len(one) if isinstance(one, list) else _tokens({"prompt": one}) or context + 1) > context
        for one in texts
    )
    if too_long and body.get("truncate_prompt_tokens") is None:
        body["truncate_prompt_tokens"] = -1


def _score(body: dict[str, Any]) -> None:
    """Texts that fit the context (or truncation), and text_1 one text or as many as text_2."""
    first, second = ("query", "documents") if "query" in body else ("text_1", "text_2")
    seconds = 1 if isinstance(body[second], str) else len(body[second])
    if isinstance(body[first], list) and len(body[first]) not in (1, seconds):
        body[first] = body[first][:1]
    every = [body[first], body[second]]
    texts = [t for one in every for t in ([one] if isinstance(one, str) else one)]
    if body.get("truncate_prompt_tokens") is None and any(
        (_tokens({"prompt": t}) or _context() + 1) > _context() for t in texts
    ):
        body["truncate_prompt_tokens"] = -1


def _responses(body: dict[str, Any]) -> None:
    """A stored response or none; the input as text (the template renders any); a named
    function in tools, forced tools that compile and no text.format beside them; the prompt
    and max_output_tokens within the context."""
    body["previous_response_id"] = None
    if not isinstance(body["input"], str):
        body["input"] = ""
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice["name"] not in {t["name"] for t in tools}:
        body["tool_choice"] = "none"
    elif choice == "required" or isinstance(choice, dict):
        body["text"] = None
        for tool in tools:
            tool["parameters"] = _VALID["json"]
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("schema") is not None:
        fmt["schema"] = _VALID["json"]
    system = (
        [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
    )
    chat = [*system, {"role": "user", "content": body["input"]}]
    count = _chat_prompt_tokens({"messages": chat, "tools": _chat_tools(tools)})
    if count is None or count >= _context():
        body["input"], body["instructions"], body["tools"], body["tool_choice"] = (
            "",
            None,
            None,
            None,
        )
        count = _chat_prompt_tokens({"messages": [{"role": "user", "content": ""}]}) or 1
    if body.get("max_output_tokens") is not None:
        body["max_output_tokens"] = min(body["max_output_tokens"], _context() - count)


def _chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The tools as the chat request the server makes of them shows them to the template."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description") or "",
                "parameters": t.get("parameters") or {"type": "object"},
            },
        }
        for t in tools
    ] or None


def _messages(body: dict[str, Any]) -> None:
    """Anthropic's: a named tool in tools, forced tools with schemas that compile, the
    prompt and max_tokens within the context."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool" and choice.get("name") not in {t["name"] for t in tools}:
        body["tool_choice"] = {"type": "none"}
    elif choice.get("type") in ("any", "tool"):
        for tool in tools:
            tool["input_schema"] = _VALID["json"]
    count = _message_tokens(body)
    if count is None or count >= _context():
        # Too long to fit: one empty message, and no system prompt or tools beside it.
        body["messages"] = [{"role": "user", "content": ""}]
        body["system"] = body["tools"] = body["tool_choice"] = None
        count = _message_tokens(body) or 1
    if "max_tokens" in body:
        body["max_tokens"] = min(body["max_tokens"], _context() - count)


def _message_tokens(body: dict[str, Any]) -> int | None:
    """The rendered conversation's length in tokens: /v1/messages/count_tokens's count."""
    keys = ("messages", "system", "tools")
    with httpx.Client(base_url=_URL, headers=_HEADERS, timeout=30) as http:
        response = http.post("/v1/messages/count_tokens", json={key: body.get(key) for key in keys})
    return response.json()["input_tokens"] if response.status_code == 200 else None


def _ollama(body: dict[str, Any]) -> None:
    """Ollama's /api/chat and /api/generate: a short prompt and answer that fit the context
    (no tools or system text beside it), and a format the structured-output backend compiles."""
    messages = body.get("messages")
    if messages:
        body["messages"] = [{"role": "user", "content": str(messages[-1].get("content"))[:8]}]
    for field in ("tools", "system"):
        body.pop(field, None)
    if isinstance(body.get("prompt"), str):
        body["prompt"] = body["prompt"][:8]
    if isinstance(body.get("format"), dict):
        body["format"] = _VALID["json"]
    options = body.get("options") or {}
    options["num_predict"] = 4
    body["options"] = options


def _ollama_embed(body: dict[str, Any]) -> None:
    """Ollama's embeddings: inputs cut to the context (truncate), the older prompt short."""
    body["truncate"] = True
    if isinstance(body.get("prompt"), str):
        body["prompt"] = body["prompt"][:64]


_REPAIRS = {
    "/api/embed": _ollama_embed,
    "/api/embeddings": _ollama_embed,
    "/api/chat": _ollama,
    "/api/generate": _ollama,
    "/v1/completions": _completions,
    "/v1/chat/completions": _chat,
    "/tokenize": _tokenize,
    "/v1/embeddings": _embeddings,
    "/v1/messages": _messages,
    "/v1/responses": _responses,
    "/score": _score,
    "/v1/score": _score,
    "/rerank": _score,
    "/v1/rerank": _score,
    "/v2/rerank": _score,
    "/v1/messages/count_tokens": _messages,
}
