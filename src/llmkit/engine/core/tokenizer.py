"""Tokenizer: a thin wrapper over a transformers fast tokenizer, with what the engine needs."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from tokenizers import Encoding
from tokenizers.decoders import DecodeStream

from llmkit.engine.core.fim import FimTokens
from llmkit.errors import ParamError
from llmkit.model.gguf.config import read_whole

# A text over this many characters per token of a limit has its start tokenized first.
_PROBE_CHARS_PER_TOKEN = 16
_PROBE_SLACK = 16


class Tokenizer:
    def __init__(self, path: str):
        self.hf = _load(path)
        backend = getattr(self.hf, "_tokenizer", None)
        if backend is None:
            raise ValueError(f"{path}: llmkit needs a fast (tokenizers-backed) tokenizer")
        # Our own copy, without the padding and truncation a tokenizer.json may carry
        # (all-MiniLM-L6-v2 pads and cuts every input to 128 tokens); transformers changes
        # those settings on its object at each call, which would race with our threads.
        self.backend = type(backend).from_str(backend.to_str())
        self.backend.no_padding()
        self.backend.no_truncation()
        self.eos_token_id: int | None = self.hf.eos_token_id
        self.bos_token_id: int | None = self.hf.bos_token_id
        self.vocab_size = len(self.hf)
        self._token_text: dict[int, str] = {}

    def encode(
        self,
        text: str,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        refuse_over: int | None = None,
    ) -> list[int]:
        """Token ids of ``text``; ``max_length`` cuts as ``tokenizer(truncation=True)`` does.

        ``refuse_over``: a text whose start alone is more tokens than this raises
        ValueError, found without tokenizing the rest (a 10 MB prompt costs milliseconds).
        """
        if refuse_over is not None and len(text) > _PROBE_CHARS_PER_TOKEN * refuse_over:
            head = self._encode(text[: _PROBE_CHARS_PER_TOKEN * refuse_over], add_special_tokens)
            # A cut word may split into a few more tokens than it would whole: leave room.
            if len(head) > refuse_over + _PROBE_SLACK:
                raise ValueError(
                    f"the prompt is longer than max_model_len={refuse_over} tokens: its first "
                    f"{_PROBE_CHARS_PER_TOKEN * refuse_over} of {len(text)} characters alone "
                    f"are {len(head)} tokens"
                )
        if max_length is None:
            return self._encode(text, add_special_tokens).ids
        # Cut the text's own tokens on the tokenizer's truncation side, then add the special
        # ones, so a BERT input keeps [CLS] and [SEP]. The backend's truncation setting is
        # left alone: it is shared with every other thread encoding at the same time.
        enc = self._encode(text, False)
        side = getattr(self.hf, "truncation_side", "right")
        if add_special_tokens:
            room = max_length - self.backend.num_special_tokens_to_add(False)
            enc.truncate(max(room, 0), direction=side)
            enc = self.backend.post_process(enc, add_special_tokens=True)
        ids = enc.ids
        if len(ids) > max_length:  # shorter than the special tokens alone
            ids = ids[:max_length] if side == "right" else ids[-max_length:]
        return ids

    def _encode(self, text: str, add_special_tokens: bool) -> Encoding:
        # encode_batch releases the GIL while it works (encode does not: a 10 MB prompt
        # held it, and so the event loop and the step thread, for seconds).
        return self.backend.encode_batch([text], add_special_tokens=add_special_tokens)[0]

    @functools.cached_property
    def fim(self) -> FimTokens:
        """The fill-in-the-middle tokens of the vocabulary (``engine/core/fim.py``)."""
        return FimTokens.find(self.hf.get_vocab())

    @functools.cached_property
    def adds_bos(self) -> bool:
        """Whether encoding with special tokens starts with the BOS token."""
        ids = self._encode("a", True).ids
        return self.bos_token_id is not None and bool(ids) and ids[0] == self.bos_token_id

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_text(self, token_id: int) -> str:
        """One token's text as logprobs show it (vLLM's ``decoded_token``)."""
        text = self._token_text.get(token_id)
        if text is None:
            text = self._token_text[token_id] = self.backend.decode(
                [token_id], skip_special_tokens=False
            )
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
                "this model's tokenizer has no chat template; pass chat_template= (or start "
                "the server with --chat-template NAME|FILE|TEMPLATE; `llmkit plugins` lists "
                "the installed templates, e.g. chatml) to use chat"
            )
        if add_generation_prompt and continue_final_message:
            raise ParamError(
                "add_generation_prompt",
                "add_generation_prompt and continue_final_message cannot both be true",
            )
        text = self.hf.apply_chat_template(
            conversation,
            chat_template=chat_template,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            tools=list(tools) if tools is not None else None,
            tokenize=False,
            **kwargs,
        )
        assert isinstance(text, str)  # tokenize=False renders one conversation to text
        return text


def _load(path: str) -> Any:
    """transformers' tokenizer of the folder ``path``. A GGUF file's folder names the class it
    was saved with and keeps its config whole: loaded directly, not through AutoTokenizer,
    which imports the family's config class and every tokenizer's names (2 s of a start)."""
    whole = read_whole(path)
    if whole is not None:
        saved = json.loads((Path(path) / "tokenizer_config.json").read_text())
        if saved.get("tokenizer_class") == "TokenizersBackend":
            from transformers.tokenization_utils_tokenizers import TokenizersBackend

            return TokenizersBackend.from_pretrained(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, **({"config": whole} if whole else {}))
