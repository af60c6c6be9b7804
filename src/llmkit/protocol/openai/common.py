"""What the OpenAI request and response models share: errors, usage, sampling fields."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer

MAX_N = 128


class RequestBody(BaseModel):
    # Unknown fields are kept in ``model_extra`` so serving can log and ignore them, as
    # OpenAI clients send fields a server may not know.
    model_config = ConfigDict(extra="allow")


class SparseModel(BaseModel):
    """A model that leaves out the fields in ``_omit_unless_set`` unless they were set.

    OpenAI's stream chunks carry ``usage`` only when the client asked for it, and a chat
    delta carries only the keys that changed.
    """

    _omit_unless_set: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for name in self._omit_unless_set - self.model_fields_set:
            data.pop(name, None)
        return data


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorInfo


class StreamOptions(BaseModel):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class PromptTokensDetails(BaseModel):
    cached_tokens: int | None = None


class UsageInfo(SparseModel):
    _omit_unless_set = frozenset({"prompt_tokens_details"})

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None

    @classmethod
    def of(
        cls, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None
    ) -> UsageInfo:
        """Usage with its total; ``cached_tokens`` (if given) as ``prompt_tokens_details``."""
        usage = cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )
        if cached_tokens is not None:
            usage.prompt_tokens_details = PromptTokensDetails(cached_tokens=cached_tokens)
        return usage


def now_seconds() -> int:
    return int(time.time())


class SamplingFields(RequestBody):
    """Sampling fields common to completions and chat, with vLLM's extras."""

    model: str | None = None
    # OpenAI's own bound; each choice is a sequence in the engine.
    n: int = Field(default=1, le=MAX_N)
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    echo: bool = False
    # vLLM's extra sampling parameters.
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    min_tokens: int = 0
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    prompt_logprobs: int | None = None
    priority: int = 0
    # vLLM's constrained decoding: one of json, json_object, regex, choice, grammar;
    # checked by the engine, which names the bad field.
    structured_outputs: dict[str, Any] | None = None


# A prompt: one string, several, one token-id list, or several.
PromptInput = str | list[str] | list[int] | list[list[int]]
