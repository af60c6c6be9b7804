"""From an EngineConfig to the served model's facts: its path, task, lengths and step budget."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from llmkit.config import EngineConfig
from llmkit.model.loader import load_hf_config, model_class, resolve_model, resolve_tokenizer
from llmkit.model.pooling_config import PoolingConfig, resolve_pooling_config
from llmkit.model.shape import model_shape
from llmkit.types import ModelInfo, Task

logger = logging.getLogger(__name__)

_DEFAULT_BATCHED_TOKENS = 2048


@dataclass(frozen=True)
class ResolvedModel:
    path: str  # the model directory ("demo" built and resolved)
    hf_config: Any  # transformers' PretrainedConfig
    info: ModelInfo
    pooling: PoolingConfig  # what a pooling request gets for the fields it leaves as None
    max_num_batched_tokens: int


def resolve(config: EngineConfig) -> ResolvedModel:
    """Everything the engine derives from its config once, checked; ``ValueError`` if wrong
    (``FileNotFoundError`` if the model is not a model directory)."""
    path = resolve_model(config.model)
    hf_config = load_hf_config(path)
    cls = model_class(hf_config)
    is_encoder = bool(getattr(cls, "is_encoder", False))
    task = _task(config, hf_config, is_encoder)
    pooling = resolve_pooling_config(path, getattr(cls, "default_pooling_type", "last"))
    text_config = hf_config.get_text_config()
    max_model_len = _max_model_len(config, text_config, task, pooling)
    shape = model_shape(cls, text_config)
    logger.info("model %s: %s", config.model, shape.describe())
    if config.speculative_config is not None and shape.recurrent_layers:
        # A rejected proposal would have to be taken back out of the recurrent state.
        raise ValueError(
            f"speculative decoding does not run on {shape.architecture} yet: its linear-"
            "attention layers keep a recurrent state that rejected tokens cannot be removed from"
        )
    info = ModelInfo(
        name=config.model,
        tokenizer=resolve_tokenizer(config.tokenizer) if config.tokenizer else path,
        task=task,
        max_model_len=max_model_len,
        vocab_size=text_config.vocab_size,
        hidden_size=text_config.hidden_size,
        max_logprobs=config.max_logprobs,
        is_encoder=is_encoder,
        **_image_fields(config, path, hf_config, cls),
        architecture=shape.architecture,
        num_experts=shape.num_experts,
        experts_per_token=shape.experts_per_token,
        sliding_window=shape.sliding_window,
    )
    return ResolvedModel(path, hf_config, info, pooling, _budget(config, max_model_len, is_encoder))


def _image_fields(config: EngineConfig, path: str, hf_config: Any, cls: Any) -> dict[str, Any]:
    """ModelInfo's image fields for a model with a vision tower (LLaVA); none for text only.
    The registry's class says how many embeddings an image becomes (``tokens_per_image``)."""
    tokens_per_image = getattr(cls, "tokens_per_image", None)
    if tokens_per_image is None or getattr(hf_config, "vision_config", None) is None:
        return {}
    token_id = getattr(hf_config, "image_token_id", None)
    if token_id is None:
        token_id = hf_config.image_token_index
    return {
        "image_token_id": token_id,
        "image_tokens": tokens_per_image(hf_config),
        "image_processor": path,
        "max_images_per_prompt": config.image_limit,
    }


def _task(config: EngineConfig, hf_config: Any, is_encoder: bool) -> Task:
    if config.task == "auto":
        return "embed" if is_encoder else "generate"
    if config.task == "generate" and is_encoder:
        archs = ", ".join(getattr(hf_config, "architectures", None) or ["this model"])
        raise ValueError(
            f"task='generate' needs a decoder, but {archs} is an embedding-only encoder; "
            "use task='embed' (or 'auto')"
        )
    return "embed" if config.task == "embed" else "generate"


def _max_model_len(config: EngineConfig, hf_config: Any, task: Task, pooling: PoolingConfig) -> int:
    limit = getattr(hf_config, "max_position_embeddings", None) or 2048
    source = "max_position_embeddings"
    st_limit = pooling.max_seq_length
    if task == "embed" and st_limit is not None and st_limit < limit:
        # The length sentence-transformers cuts inputs to; vLLM caps max_model_len there too.
        limit, source = st_limit, "max_seq_length (sentence_bert_config.json)"
    wanted = config.max_model_len
    if wanted is None:
        return int(limit)
    if wanted > limit:
        raise ValueError(f"max_model_len={wanted} is more than the model's {source}={limit}")
    return wanted


def _budget(config: EngineConfig, max_model_len: int, is_encoder: bool) -> int:
    """The step's token budget. An encoder computes each input whole in one step, so one step
    must hold the longest; so must every step when chunked prefill is off."""
    whole_prompts = not config.enable_chunked_prefill or is_encoder
    budget = config.max_num_batched_tokens
    if budget is None:
        return (
            max(_DEFAULT_BATCHED_TOKENS, max_model_len)
            if whole_prompts
            else _DEFAULT_BATCHED_TOKENS
        )
    if whole_prompts and budget < max_model_len:
        why = "for an encoder-only model" if is_encoder else "when chunked prefill is disabled"
        raise ValueError(
            f"max_num_batched_tokens ({budget}) must be >= max_model_len ({max_model_len}) {why}"
        )
    return budget
