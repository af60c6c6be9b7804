"""The small endpoints: models list, tokenize and detokenize (vLLM's shapes)."""

from __future__ import annotations

from llmkit.protocol.openai import (
    DetokenizeRequest,
    DetokenizeResponse,
    ModelCard,
    ModelList,
    TokenizeRequest,
    TokenizeResponse,
)
from llmkit.serving.context import ServingContext
from llmkit.serving.conversation import content_format, to_conversation
from llmkit.serving.errors import OpenAIError, bad_request
from llmkit.serving.openai.chat import render_messages
from llmkit.serving.openai.models import card_fields, model_card
from llmkit.serving.tool_choice import check_tools


def list_models(ctx: ServingContext) -> ModelList:
    if ctx.models is not None:
        return ModelList(data=[model_card(status, ctx) for status in ctx.models.status()])
    info = ctx.engine.model_info
    common = card_fields(info, ctx.engine.tokenizer)
    cards = [ModelCard(id=name, root=info.name, **common) for name in ctx.model_names]
    cards += [
        ModelCard(id=name, root=lora.path, parent=ctx.model_name, **common)
        for name, lora in ctx.loras.adapters.items()
    ]
    return ModelList(data=cards)


def retrieve_model(ctx: ServingContext, model_id: str) -> ModelCard:
    """One served model's card (``GET /v1/models/{id}``); an unknown id is OpenAI's 404."""
    for card in list_models(ctx).data:
        if card.id == model_id:
            return card
    raise OpenAIError(404, f"The model `{model_id}` does not exist.", "model", "model_not_found")


async def tokenize(ctx: ServingContext, req: TokenizeRequest) -> TokenizeResponse:
    """Token ids of a prompt, or of chat messages rendered through the template."""
    ctx.resolve_model(req.model)
    tokenizer = ctx.engine.tokenizer
    if (req.prompt is None) == (req.messages is None):
        raise bad_request("give exactly one of prompt and messages", "prompt")
    check_tools(req.tools or [])
    if req.messages is not None:
        prompt = await render_messages(
            ctx,
            to_conversation(req.messages, content_format(ctx, req.chat_template)),
            req.chat_template,
            req.chat_template_kwargs,
            req.add_generation_prompt,
            req.continue_final_message,
            req.tools or None,
        )
        ids = prompt.token_ids
        if req.add_special_tokens:
            ids = await ctx.offload(lambda: tokenizer.encode(prompt.text or ""))
    else:
        add_special = True if req.add_special_tokens is None else req.add_special_tokens
        text = req.prompt or ""
        ids = await ctx.offload(lambda: tokenizer.encode(text, add_special_tokens=add_special))
    return TokenizeResponse(
        count=len(ids),
        max_model_len=ctx.engine.model_info.max_model_len,
        tokens=ids,
        token_strs=[tokenizer.token_text(t) for t in ids] if req.return_token_strs else None,
    )


def detokenize(ctx: ServingContext, req: DetokenizeRequest) -> DetokenizeResponse:
    ctx.resolve_model(req.model)
    vocab = ctx.engine.model_info.vocab_size
    bad = [t for t in req.tokens if not 0 <= t < vocab]
    if bad:
        raise bad_request(f"token id {bad[0]} is out of vocabulary (0..{vocab - 1})", "tokens")
    # Special tokens stay, so that detokenize inverts tokenize.
    return DetokenizeResponse(
        prompt=ctx.engine.tokenizer.decode(req.tokens, skip_special_tokens=False)
    )
