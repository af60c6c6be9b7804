"""Prompt-lookup (n-gram) proposals for speculative decoding: pure Python, no model.

The last ``n`` tokens of a sequence are looked for earlier in it (longest ``n`` first,
from ``prompt_lookup_max`` down to ``prompt_lookup_min``); the tokens that followed the
latest earlier occurrence are proposed as its continuation.
"""

from __future__ import annotations

from array import array


class NgramProposer:
    def __init__(self, num_speculative_tokens: int, lookup_max: int, lookup_min: int):
        self.k = num_speculative_tokens
        self.lookup_max = lookup_max
        self.lookup_min = lookup_min

    def propose(self, tokens: list[int], limit: int) -> list[int]:
        """Up to ``min(k, limit)`` tokens to follow ``tokens``; none when no n-gram recurs."""
        k = min(self.k, limit)
        if k <= 0 or len(tokens) <= self.lookup_min:
            return []
        # Fixed-width bytes turn the search into bytes.rfind, which is C-fast.
        data = array("i", tokens).tobytes()
        width = array("i").itemsize
        for n in range(min(self.lookup_max, len(tokens) - 1), self.lookup_min - 1, -1):
            suffix = data[-n * width :]
            end = len(data) - width  # an occurrence must end before the last token
            while True:
                at = data.rfind(suffix, 0, end)
                if at < 0:
                    break
                if at % width == 0:  # aligned on a token, not inside one
                    first = at // width + n
                    return tokens[first : first + k]
                end = at + len(suffix) - 1
        return []
