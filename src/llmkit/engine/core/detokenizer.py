"""Incremental detokenization with stop strings; never emits half a UTF-8 character."""

from __future__ import annotations

from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.sampling_params import SamplingParams


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Tokenizer, prompt_token_ids: list[int], params: SamplingParams):
        self._tokenizer = tokenizer
        self._stream = tokenizer.decode_stream(prompt_token_ids, params.skip_special_tokens)
        self._stop = list(params.stop or [])
        self._include_stop = params.include_stop_str_in_output
        self._max_stop_len = max((len(s) for s in self._stop), default=0)
        self.text = ""

    def update(self, token_id: int, check_stop: bool) -> str | None:
        """Add one token's text; returns the stop string it completed, if any."""
        piece = self._stream.step(self._tokenizer.backend, token_id)
        if not piece:
            return None
        old_len = len(self.text)
        self.text += piece
        if not (check_stop and self._stop):
            return None
        # A stop string can straddle the old text and the new piece.
        search_from = max(0, old_len - self._max_stop_len + 1)
        best = None
        for stop in self._stop:
            at = self.text.find(stop, search_from)
            if at != -1 and (best is None or at < best[0]):
                best = (at, stop)
        if best is None:
            return None
        at, stop = best
        self.text = self.text[: at + len(stop) if self._include_stop else at]
        return stop

    def visible_text(self, finished: bool) -> str:
        """The text safe to stream: the tail that may yet begin a stop string is held back."""
        if finished or self._include_stop or self._max_stop_len <= 1:
            return self.text
        return self.text[: max(0, len(self.text) - self._max_stop_len + 1)]
