"""LLM: the blocking offline API (generate, chat, embed, score, rerank) with a progress bar."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

from tqdm.auto import tqdm

from llmkit.config import EngineConfig
from llmkit.engine.beam_search import BeamSearchOutput, BeamSearchParams, beam_search
from llmkit.engine.core.engine_core import EngineCore
from llmkit.engine.core.output_state import RequestState
from llmkit.engine.processor import InputProcessor
from llmkit.engine.protocol import Conversation, ModelInfo, PromptType
from llmkit.engine.sched.request import Request
from llmkit.engine.scoring import (
    RerankResult,
    ScoringOutput,
    ScoringRequestOutput,
    cosine,
    pairs,
    ranked,
)
from llmkit.errors import LLMKitError, ParamError, RequestFailedError
from llmkit.lora_request import LoRARequest
from llmkit.model.lora_adapter import LoRAAdapter
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, RequestOutputKind, SamplingParams
from llmkit.types import EngineStats

Params = SamplingParams | PoolingParams
LoRAArg = LoRARequest | Sequence[LoRARequest | None] | None


class LLM:
    """Runs a model over batches of prompts in this thread; results come in input order.

    ``close()`` (or leaving ``with LLM(...) as llm:``) ends what it started at once: the
    tensor-parallel workers, which otherwise end when the object is collected.
    """

    def __init__(self, model: str, **kwargs: Any):
        self.config = EngineConfig.from_kwargs(model, **kwargs)
        self._core = EngineCore(self.config)
        self._processor = InputProcessor(self._core.model_info, self._core.tokenizer)
        self._counter = 0

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """End the tensor-parallel workers, if any; the object serves no request after."""
        self._core.close()

    @property
    def model_info(self) -> ModelInfo:
        return self._core.model_info

    def stats(self) -> EngineStats:
        """The engine's load and counters now."""
        return self._core.stats()

    def get_tokenizer(self) -> Any:
        """The transformers tokenizer, as vLLM's ``LLM.get_tokenizer`` returns it."""
        return self._core.tokenizer.hf

    def generate(
        self,
        prompts: PromptType | Sequence[PromptType],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = True,
        lora_request: LoRAArg = None,
    ) -> list[RequestOutput]:
        """``lora_request``: the LoRA adapter of every prompt, or a list with one per prompt
        (None: the base model)."""
        prompts = _as_list(prompts)
        params = _broadcast(sampling_params or SamplingParams(), len(prompts), "sampling_params")
        # FINAL_ONLY avoids building an output per step; the result is the same.
        params = [_final_only(p) for p in params]
        return self._run(
            prompts, params, use_tqdm, _broadcast(lora_request, len(prompts), "lora_request")
        )

    def beam_search(
        self,
        prompts: PromptType | Sequence[PromptType],
        params: BeamSearchParams,
        lora_request: LoRARequest | None = None,
        use_tqdm: bool = False,
    ) -> list[BeamSearchOutput]:
        """vLLM's beam search: the best ``params.beam_width`` sequences of each prompt
        (see :mod:`llmkit.engine.beam_search` for how they are ranked)."""
        ids = [self._processor.tokenize(p)["prompt_token_ids"] for p in _as_list(prompts)]
        tok = self._core.tokenizer

        def generate(batch: list[list[int]], step: SamplingParams) -> list[RequestOutput]:
            return self.generate(batch, step, use_tqdm=False, lora_request=lora_request)

        return beam_search(generate, ids, params, tok.eos_token_id, tok.decode)

    def chat(
        self,
        messages: Conversation | Sequence[Conversation],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = True,
        chat_template: str | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict[str, Any]] | None = None,
        lora_request: LoRAArg = None,
    ) -> list[RequestOutput]:
        conversations = cast(
            "list[Conversation]",
            [messages] if messages and isinstance(messages[0], dict) else list(messages),
        )
        prompts = [
            self._processor.render_chat(
                c,
                chat_template,
                chat_template_kwargs,
                add_generation_prompt,
                continue_final_message,
                tools,
            )
            for c in conversations
        ]
        return self.generate(prompts, sampling_params, use_tqdm, lora_request)

    def embed(
        self,
        prompts: PromptType | Sequence[PromptType],
        pooling_params: PoolingParams | Sequence[PoolingParams] | None = None,
        use_tqdm: bool = True,
    ) -> list[EmbeddingRequestOutput]:
        prompts = _as_list(prompts)
        params = _broadcast(pooling_params or PoolingParams(), len(prompts), "pooling_params")
        return self._run(prompts, params, use_tqdm, [None] * len(prompts))

    def score(
        self,
        text_1: str | Sequence[str],
        text_2: str | Sequence[str],
        use_tqdm: bool = True,
    ) -> list[ScoringRequestOutput]:
        """Each pair's cosine similarity on an embedding model, as vLLM scores with a
        bi-encoder: one ``text_1`` against each ``text_2``, or two lists pairwise."""
        pairs_ = pairs(text_1, text_2)
        texts = list(dict.fromkeys(t for pair in pairs_ for t in pair))
        embedded = dict(zip(texts, self.embed(texts, use_tqdm=use_tqdm), strict=True))
        return [
            ScoringRequestOutput(
                request_id=str(i),
                prompt_token_ids=embedded[a].prompt_token_ids + embedded[b].prompt_token_ids,
                outputs=ScoringOutput(
                    cosine(embedded[a].outputs.embedding, embedded[b].outputs.embedding)
                ),
            )
            for i, (a, b) in enumerate(pairs_)
        ]

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        use_tqdm: bool = True,
    ) -> list[RerankResult]:
        """The documents by their score against ``query``, highest first; the first
        ``top_n`` if given."""
        if not documents:
            raise ParamError("documents", "documents must not be empty")
        scores = self.score(query, documents, use_tqdm)
        return ranked(documents, [s.outputs.score for s in scores], top_n)

    def _run(
        self,
        prompts: list[PromptType],
        params: Sequence[Params],
        use_tqdm: bool,
        loras: list[LoRARequest | None],
    ) -> list:
        core = self._core
        # Check the whole batch before queueing any of it: a bad prompt leaves nothing behind.
        batch: list[tuple[RequestState, list[Request], LoRAAdapter | None]] = []
        for prompt, p, lora in zip(prompts, params, loras):
            self._counter += 1
            state, requests = self._processor.process(prompt, p, str(self._counter), 0, lora)
            batch.append((state, requests, None if lora is None else core.lora_adapter(lora)))
        for state, requests, adapter in batch:
            # Offline, the whole batch is the queue: the limits are for servers.
            core.reserve(len(state.prompt_token_ids), refuse=False)
            core.add(state, requests, adapter)  # one that fails holds its error
        states = [state for state, _, _ in batch]
        bar = tqdm(total=len(states), desc="Processed prompts", disable=not use_tqdm, unit="req")
        generated = core.stats().generated_tokens
        try:
            pending = {s.request_id for s in states if s.error is None}
            while pending:
                for state in core.step():
                    if state.finished and state.request_id in pending:
                        pending.discard(state.request_id)
                        bar.update(1)
                if use_tqdm:
                    tokens = core.stats().generated_tokens - generated
                    rate = tokens / max(bar.format_dict["elapsed"], 1e-9)
                    bar.set_postfix_str(f"output {rate:.1f} tok/s", refresh=False)
                if not core.has_work() and pending:
                    raise LLMKitError("the engine went idle with requests unfinished")
        except BaseException:
            for state in states:
                core.abort(state.request_id)
            raise
        finally:
            bar.close()
        outputs = []
        for state in states:
            if state.error is not None:
                raise RequestFailedError(f"request {state.request_id} failed: {state.error}")
            outputs.append(state.take_output())
        return outputs


def _as_list(prompts: Any) -> list[PromptType]:
    if isinstance(prompts, (str, dict)):
        return [prompts]
    prompts = list(prompts)
    if prompts and isinstance(prompts[0], int):
        return [prompts]  # one prompt given as token ids
    return prompts


def _broadcast(params: Any, n: int, name: str) -> list:
    if isinstance(params, (list, tuple)):
        if len(params) != n:
            raise ValueError(f"{name} has {len(params)} entries for {n} prompts; they must match")
        return list(params)
    return [params] * n


def _final_only(params: SamplingParams) -> SamplingParams:
    if params.output_kind is RequestOutputKind.FINAL_ONLY:
        return params
    return dataclasses.replace(params, output_kind=RequestOutputKind.FINAL_ONLY)
