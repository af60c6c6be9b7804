"""Input processing on the caller's side: prompts -> checked token ids, params -> requests.

Everything that can be wrong with a request is found here and raised as ValueError,
before anything reaches the engine core.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from llmkit.chat.resolve import resolve_chat_template
from llmkit.engine.core.detokenizer import IncrementalDetokenizer
from llmkit.engine.core.output_state import CompletionState, RequestState
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.multimodal import ImageInputs, split_prompt
from llmkit.engine.protocol import Conversation, ModelInfo, PromptType, TokensPrompt
from llmkit.engine.sched.context_window import completion_budget
from llmkit.engine.sched.request import ImageInput, Request
from llmkit.errors import ParamError
from llmkit.lora_request import LoRARequest
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.structured import DEFAULT_COMPILE_TIMEOUT_S, CompiledGrammar, GrammarCompiler
from llmkit.structured.llguidance_backend import LLGuidanceBackend


def new_request_id() -> str:
    return uuid.uuid4().hex


class InputProcessor:
    """Checks and tokenizes input for one model; the same on every side of the engine protocol."""

    def __init__(self, info: ModelInfo, tokenizer: Tokenizer):
        self.info = info
        self.tokenizer = tokenizer
        self.max_model_len = info.max_model_len
        self.vocab_size = info.vocab_size
        self.images = ImageInputs(info)
        # Grammars compile on the caller's side, within a time limit (llguidance takes about
        # a millisecond for a typical schema), so the step thread never waits on one;
        # EngineFrontend.compile_structured compiles off an event loop.
        # A grammar may name every token id of the tokenizer, which may hold more than the
        # model has logits for; the sampler masks those.
        self.grammars = GrammarCompiler(
            lambda: LLGuidanceBackend(
                tokenizer.backend.to_str(),
                max(info.vocab_size, tokenizer.vocab_size),
                tokenizer.eos_token_id,
            )
        )

    def tokenize(self, prompt: PromptType, truncate: int | None = None) -> TokensPrompt:
        """Accepts a string, token ids, or ``{"prompt": ...}`` / ``{"prompt_token_ids": ...}``.

        ``truncate`` (``-1``: max_model_len) cuts text the way its tokenizer does, keeping
        special tokens such as BERT's [CLS] and [SEP]; token ids keep their last ones, as
        in vLLM.
        """
        if truncate is not None and truncate > self.max_model_len:
            raise ParamError(
                "truncate_prompt_tokens",
                f"truncate_prompt_tokens={truncate} is more than max_model_len="
                f"{self.max_model_len}; choose a smaller truncation size",
            )
        limit = None if truncate is None else (self.max_model_len if truncate == -1 else truncate)
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                text, ids = prompt.get("prompt"), list(prompt["prompt_token_ids"])
            elif "prompt" in prompt:
                text = prompt["prompt"]
                if not isinstance(text, str):
                    raise ValueError(f"'prompt' must be a string, got {type(text).__name__}")
                ids = self._encode(text, limit)
            else:
                raise ValueError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
        elif isinstance(prompt, str):
            text, ids = prompt, self._encode(prompt, limit)
        elif isinstance(prompt, (list, tuple)) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in prompt
        ):
            text, ids = None, list(prompt)
        else:
            raise ValueError(
                "prompt must be a string, a list of token ids, or a dict with "
                f"'prompt' or 'prompt_token_ids'; got {type(prompt).__name__}"
            )
        if limit is not None:
            ids = ids[-limit:]
        if not ids:
            raise ValueError("the prompt is empty: it must hold at least one token")
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(
                f"token id {bad[0]} is out of vocabulary (valid ids are 0..{self.vocab_size - 1})"
            )
        return {"prompt": text, "prompt_token_ids": ids}

    def render_chat(
        self,
        conversation: Conversation,
        chat_template: str | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict[str, Any]] | None = None,
    ) -> TokensPrompt:
        """A conversation rendered through the chat template (``chat_template``: the
        template text or an installed template's name), as a prompt dict."""
        if chat_template is not None:
            chat_template = resolve_chat_template(chat_template)
        text = self.tokenizer.apply_chat_template(
            conversation,
            chat_template=chat_template,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            tools=tools,
            **(chat_template_kwargs or {}),
        )
        # The template writes its own BOS; adding another would double it.
        return {
            "prompt": text,
            "prompt_token_ids": self.tokenizer.encode(text, add_special_tokens=False),
        }

    def _encode(self, text: str, max_length: int | None = None) -> list[int]:
        """A prompt's token ids; one far too long for the model is refused after tokenizing
        only its start (a rendered conversation is not: /tokenize takes any length)."""
        if max_length is not None:
            return self.tokenizer.encode(text, max_length=max_length)
        return self.tokenizer.encode(text, refuse_over=self.max_model_len)

    def check_sampling(self, params: SamplingParams, prompt_len: int) -> None:
        completion_budget(prompt_len, params.max_tokens, self.max_model_len)
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(params, name)
            if value is not None and value > self.info.max_logprobs:
                raise ParamError(
                    name,
                    f"{name}={value} is more than the engine allows (max_logprobs="
                    f"{self.info.max_logprobs})",
                )
        for name, ids in (
            ("stop_token_ids", params.stop_token_ids or []),
            ("allowed_token_ids", params.allowed_token_ids or []),
            ("logit_bias", list(params.logit_bias or {})),
        ):
            bad = [t for t in ids if not 0 <= t < self.vocab_size]
            if bad:
                raise ParamError(
                    name,
                    f"{name} holds token id {bad[0]}, out of vocabulary (0..{self.vocab_size - 1})",
                )

    def compile_grammar(
        self, params: SamplingParams, timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
    ) -> CompiledGrammar | None:
        """The grammar of ``params.structured_outputs``, compiled (or cached); ValueError
        naming the field if it is invalid or does not compile within ``timeout_s``."""
        if params.structured_outputs is None:
            return None
        return self.grammars.compile(params.structured_outputs, timeout_s)

    def check_task(self, params: SamplingParams | PoolingParams) -> None:
        """Reject what this engine's task does not serve (vLLM: generate on a pooling model)."""
        if isinstance(params, PoolingParams) and not self.info.supports_embed:
            raise ValueError(
                "this engine serves text generation (task='generate'); embeddings need an "
                "engine started with task='embed'"
            )
        if isinstance(params, SamplingParams) and not self.info.supports_generate:
            if self.info.is_encoder:
                raise ValueError(
                    "this model is an embedding-only encoder: it cannot generate text; "
                    "ask it for embeddings instead"
                )
            raise ValueError(
                "this engine serves embeddings (task='embed'); generating text needs an "
                "engine started with task='generate'"
            )

    def check_pooling_params(self, params: PoolingParams) -> None:
        if params.dimensions is not None and params.dimensions > self.info.hidden_size:
            raise ParamError(
                "dimensions",
                f"dimensions={params.dimensions} is more than the model's embedding size "
                f"({self.info.hidden_size})",
            )

    def check_pooling(self, prompt_len: int) -> None:
        if prompt_len > self.max_model_len:
            raise ValueError(
                f"the input is {prompt_len} tokens long, more than max_model_len="
                f"{self.max_model_len}; shorten it or set truncate_prompt_tokens"
            )

    def prepare(self, prompt: PromptType, params: SamplingParams | PoolingParams) -> TokensPrompt:
        """The checked token ids of one prompt for ``params``: every check but the request id's.

        A client of an engine in another process runs this before sending anything.
        """
        self.check_task(params)
        prompt, images = split_prompt(prompt)
        if images:
            self.images.check(images)
            raise ValueError(
                "multi_modal_data: images go with generation requests to an engine in this "
                "process (LLM, AsyncEngine)"
            )
        if isinstance(params, PoolingParams):
            self.check_pooling_params(params)
            tokens = self.tokenize(prompt, params.truncate_prompt_tokens)
            self.check_pooling(len(tokens["prompt_token_ids"]))
            return tokens
        if not isinstance(params, SamplingParams):
            raise ValueError(
                f"expected SamplingParams or PoolingParams, got {type(params).__name__}"
            )
        return self._prepare_sampling(prompt, params)[0]

    def _prepare_sampling(
        self, prompt: PromptType, params: SamplingParams
    ) -> tuple[TokensPrompt, CompiledGrammar | None, list[ImageInput]]:
        prompt, images = split_prompt(prompt)
        if images:
            self.images.check(images)  # before tokenizing or reading any image
        tokens = self.tokenize(prompt)
        # Placeholders expand before the length checks, which count image tokens.
        ids, inputs = self.images.expand(tokens["prompt_token_ids"], images or [])
        tokens = {"prompt": tokens.get("prompt"), "prompt_token_ids": ids}
        self.check_sampling(params, len(ids))
        # An invalid constraint fails here, before anything is queued.
        return tokens, self.compile_grammar(params), inputs

    def process(
        self,
        prompt: PromptType,
        params: SamplingParams | PoolingParams,
        request_id: str | None = None,
        priority: int = 0,
        lora_request: LoRARequest | None = None,
    ) -> tuple[RequestState, list[Request]]:
        """Tokenize and check one prompt; returns its output state and the core's requests."""
        request_id = request_id or new_request_id()
        if not isinstance(params, SamplingParams):
            if lora_request is not None:
                raise ValueError("lora_request applies to text generation, not to embeddings")
            text, ids = _unpack(self.prepare(prompt, params))
            state = RequestState(request_id, text, ids, params.output_kind, [], pooling=True)
            return state, [Request(request_id, ids, pooling_params=params, priority=priority)]
        self.check_task(params)
        tokens, grammar, images = self._prepare_sampling(prompt, params)
        text, ids = _unpack(tokens)
        max_tokens = completion_budget(len(ids), params.max_tokens, self.max_model_len)
        completions, requests = [], []
        for i in range(params.n):
            child_params = params
            if params.n > 1 and params.seed is not None:
                # Each completion draws from its own stream, or all n would be equal; the
                # seed wraps as a 64-bit generator's does, so the last seeds stay valid.
                child_params = dataclasses.replace(params, seed=(params.seed + i) % 2**64)
            completions.append(
                CompletionState(
                    index=i,
                    detokenizer=IncrementalDetokenizer(self.tokenizer, ids, params),
                    want_logprobs=params.logprobs is not None,
                )
            )
            requests.append(
                Request(
                    request_id=f"{request_id}#{i}" if params.n > 1 else request_id,
                    prompt_token_ids=ids,
                    sampling_params=child_params,
                    eos_token_id=self.tokenizer.eos_token_id,
                    priority=priority,
                    index=i,
                    max_tokens=max_tokens,
                    matcher=None if grammar is None else grammar.matcher(),
                    images=images,
                    cache_salt=b"" if lora_request is None else _lora_salt(lora_request),
                    lora_id=0 if lora_request is None else lora_request.id,
                )
            )
        state = RequestState(
            request_id,
            text,
            ids,
            params.output_kind,
            completions,
            want_prompt_logprobs=params.prompt_logprobs is not None,
        )
        return state, requests


def _unpack(prompt: TokensPrompt) -> tuple[str | None, list[int]]:
    return prompt.get("prompt"), prompt["prompt_token_ids"]


def _lora_salt(lora: LoRARequest) -> bytes:
    """Seeds the prefix-cache hash chain: the same text under two adapters shares no KV."""
    return f"lora:{lora.id}:{lora.path}".encode()
