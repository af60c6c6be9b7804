"""Fill in the middle for code completion: a prompt and a suffix (OpenAI's completions,
Ollama's ``/api/generate``, llama-server's ``/infill``) as the model's FIM prompt."""

from __future__ import annotations

from collections.abc import Sequence

from llmkit.engine.core.fim import FimTokens, infill_prompt
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import bad_request
from llmkit.serving.prompts import EnginePrompt


def model_fim(ctx: ServingContext, param: str) -> FimTokens:
    """The served model's FIM tokens; a 400 naming those it lacks if it cannot infill."""
    fim = ctx.engine.tokenizer.fim
    if fim.missing:
        raise bad_request(
            "this model cannot fill in the middle: its vocabulary has no "
            f"{', '.join(fim.missing)} token (as llama.cpp names them)",
            param,
        )
    return fim


def infill(
    ctx: ServingContext,
    prefix: EnginePrompt | str,
    suffix: str,
    max_tokens: int | None,
    param: str = "suffix",
    extra: Sequence[tuple[str, str]] = (),
    prompt: str = "",
) -> EnginePrompt:
    """``prefix`` (a prompt, tokenized or not), ``suffix`` and the repository's ``extra``
    files (name, text) as one FIM prompt that leaves room for ``max_tokens``."""
    fim = model_fim(ctx, param)
    tokenizer = ctx.engine.tokenizer

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    if isinstance(prefix, str):
        head = encode(prefix)
    elif prefix.text is not None:
        head = encode(prefix.text)
    else:
        head = prefix.token_ids
        if tokenizer.adds_bos and head[:1] == [tokenizer.bos_token_id]:
            head = head[1:]
    context = ctx.engine.model_info.max_model_len
    # Without a limit (llama-server's n_predict -1) a quarter of the context, at most 256
    # tokens, is kept for the answer.
    room = context - (max_tokens or min(256, context // 4))
    bos = tokenizer.bos_token_id if tokenizer.adds_bos else None
    ids = infill_prompt(fim, encode, head, encode(suffix), extra, encode(prompt), bos, room)
    return EnginePrompt(None, ids)
