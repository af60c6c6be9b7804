"""Tokenizer: a thin wrapper over a transformers fast tokenizer, with what the engine needs."""

from __future__ import annotations

from typing import Any

from tokenizers.decoders import DecodeStream


class Tokenizer:
    def __init__(self, path: str):
        from transformers import AutoTokenizer

        self.hf = AutoTokenizer.from_pretrained(path)
        backend = getattr(self.hf, "_tokenizer", None)
        if backend is None:
            raise ValueError(f"{path}: llmkit needs a fast (tokenizers-backed) tokenizer")
        self.backend = backend
        self.eos_token_id: int | None = self.hf.eos_token_id
        self.bos_token_id: int | None = self.hf.bos_token_id
        self.vocab_size = len(self.hf)
        self._token_text: dict[int, str] = {}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_text(self, token_id: int) -> str:
        """One token's text as logprobs show it (vLLM's ``decoded_token``)."""
        text = self._token_text.get(token_id)
        if text is None:
            text = self._token_text[token_id] = self.backend.decode([token_id], skip_special_tokens=False)
        return text

    def decode_stream(self, prompt_ids: list[int], skip_special_tokens: bool) -> DecodeStream:
        """An incremental, UTF-8-safe decoder primed with the end of the prompt for context."""
        return DecodeStream(ids=prompt_ids[-6:], skip_special_tokens=skip_special_tokens)

    @property
    def chat_template(self) -> str | None:
        return getattr(self.hf, "chat_template", None)

    def apply_chat_template(
        self,
        conversation: list[dict[str, Any]],
        chat_template: str | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        if chat_template is None and self.chat_template is None:
            raise ValueError(
                "this model's tokenizer has no chat template; pass chat_template= "
                "(or --chat-template) to use chat"
            )
        if add_generation_prompt and continue_final_message:
            raise ValueError("add_generation_prompt and continue_final_message cannot both be true")
        return self.hf.apply_chat_template(
            conversation,
            chat_template=chat_template,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            tools=tools,
            tokenize=False,
            **kwargs,
        )
