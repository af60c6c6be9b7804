"""API prompts -> engine prompts: one or many strings or token-id lists, tokenized and checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from llmkit.engine.protocol import TokensPrompt
from llmkit.protocol.openai import PromptInput
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import bad_request, from_value_error


@dataclass
class EnginePrompt:
    """A prompt tokenized by the serving layer, so the engine does not tokenize it again;
    ``images`` (PIL images) fill its image placeholders, in order."""

    text: str | None
    token_ids: list[int]
    images: list[Any] = field(default_factory=list)

    def as_input(self) -> TokensPrompt | dict[str, Any]:
        prompt: TokensPrompt = {"prompt": self.text, "prompt_token_ids": self.token_ids}
        if self.images:
            return {**prompt, "multi_modal_data": {"image": self.images}}
        return prompt


async def tokenize_inputs(
    ctx: ServingContext,
    inputs: PromptInput,
    param: str,
    truncate: int | None = None,
) -> list[EnginePrompt]:
    """A string, a list of token ids, or a list of either (never empty: the request models
    refuse that, and an empty text where the request's model does), as engine prompts."""
    items, single = _split(inputs)
    prompts = []
    for i, item in enumerate(items):
        where = param if single else f"{param}[{i}]"
        try:
            prompt = await ctx.offload(ctx.engine.tokenize, item, truncate)
        except ValueError as exc:
            error = from_value_error(exc, default=param)
            if error.param == param:
                error = bad_request(f"{where}: {exc}", param)
            raise error from None
        prompts.append(EnginePrompt(prompt.get("prompt"), prompt["prompt_token_ids"]))
    return prompts


def _split(inputs: PromptInput) -> tuple[list[str | list[int]], bool]:
    """The prompts in ``inputs``, and whether it held just one."""
    if isinstance(inputs, str):
        return [inputs], True
    if isinstance(inputs[0], int):
        return [inputs], True
    return cast("list[str | list[int]]", list(inputs)), False
