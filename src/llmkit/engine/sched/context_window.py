"""The room a request has in the model's context: one rule for every API and engine call."""

from __future__ import annotations

from llmkit.errors import ParamError


def context_room(num_tokens: int, max_model_len: int) -> int:
    """The tokens the context still holds after ``num_tokens`` of it (never below 0)."""
    return max(max_model_len - num_tokens, 0)


def completion_budget(
    prompt_len: int, max_tokens: int | None, max_model_len: int, what: str = "prompt"
) -> int:
    """The tokens a request may generate: ``max_tokens``, or when it is unset the rest of
    the context. A prompt that leaves no room, or a ``max_tokens`` past the room left, is a
    ``ParamError`` naming ``what`` with the counts, in OpenAI's words (never a silent clamp)."""
    room = context_room(prompt_len, max_model_len)
    limit = f"This model's maximum context length is {max_model_len} tokens (max_model_len)."
    if room == 0:
        raise ParamError(
            what,
            f"{limit} However, your {what} resulted in {prompt_len} tokens, which leaves no "
            f"room for a completion. Please reduce the length of the {what}.",
        )
    if max_tokens is None:
        return room
    if max_tokens > room:
        raise ParamError(
            what,
            f"{limit} However, you requested {prompt_len + max_tokens} tokens ({prompt_len} "
            f"in the {what}, {max_tokens} in the completion). Please reduce the length of the "
            f"{what} or completion.",
        )
    return max_tokens
