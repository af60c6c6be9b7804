"""The interface a structured-output backend implements: compile a spec, match tokens."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from llmkit.sampling_params import StructuredOutputsParams


class GrammarMatcher(Protocol):
    """One sequence's position in its grammar; it advances by the tokens sampled."""

    def accept(self, token_id: int) -> bool:
        """Advance by ``token_id``; False if the grammar does not allow it."""
        ...

    def fill_bitmask(self, bitmask: NDArray[np.int32], row: int) -> None:
        """Write the tokens allowed next into ``bitmask[row]`` (int32, one bit per token)."""
        ...

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens."""
        ...

    def is_terminated(self) -> bool:
        """The grammar is complete and allows nothing more (EOS aside)."""
        ...

    def can_end(self) -> bool:
        """The text so far is a complete match (though it may go on)."""
        ...


class CompiledGrammar(Protocol):
    """A compiled spec, shared by every request that asks for it."""

    def matcher(self) -> GrammarMatcher:
        """A fresh matcher at the start of the grammar."""
        ...


class StructuredBackend(Protocol):
    def compile(self, spec: StructuredOutputsParams) -> CompiledGrammar:
        """Compile ``spec``; ValueError naming the field if it is invalid or unsupported."""
        ...
