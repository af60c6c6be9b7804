"""A request inside the engine core, and its status machine. No torch here."""

from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from llmkit.errors import InternalError
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.structured import GrammarMatcher


class RequestStatus(enum.IntEnum):
    WAITING = 0
    RUNNING = 1
    PREEMPTED = 2
    # Everything from here on is finished.
    FINISHED_STOPPED = 3
    FINISHED_LENGTH = 4
    FINISHED_ABORTED = 5
    FINISHED_ERROR = 6

    @property
    def finished(self) -> bool:
        return self >= RequestStatus.FINISHED_STOPPED


FINISH_REASONS = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
    RequestStatus.FINISHED_ERROR: "error",
}

_ALLOWED = {
    RequestStatus.WAITING: {RequestStatus.RUNNING},
    RequestStatus.RUNNING: {RequestStatus.PREEMPTED},
    RequestStatus.PREEMPTED: {RequestStatus.RUNNING},
}

_arrival_order = itertools.count()


@dataclass(frozen=True, eq=False)
class ImageInput:
    """One image of a prompt: its placeholder tokens and what the vision encoder reads."""

    offset: int  # the first placeholder token's position in the prompt
    length: int  # placeholder tokens: the embeddings the image becomes
    content_hash: bytes  # sha256 of the pixel values; keys the KV blocks that hold it
    pixel_values: Any  # a torch.Tensor [channels, height, width]; no torch imported here


@dataclass(eq=False)
class Request:
    """One sequence to compute: a prompt plus the tokens generated so far.

    A user request with ``n > 1`` becomes ``n`` of these (``index`` 0..n-1) that share the
    prompt's KV blocks through the prefix cache.
    """

    request_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams | None = None
    pooling_params: PoolingParams | None = None
    eos_token_id: int | None = None
    priority: int = 0
    index: int = 0
    arrival_time: float = field(default_factory=time.monotonic)
    max_tokens: int = 0  # resolved by the engine from max_tokens and max_model_len
    # Structured outputs: where this sequence is in its grammar. Only sampling advances it,
    # by the token sampled; output tokens survive preemption, so it stays in step with them.
    matcher: GrammarMatcher | None = None
    # Prefix-cache keys beyond the token ids. ``cache_salt`` seeds the hash chain, so requests
    # with different salts (LoRA adapters, ...) never share a block. ``placeholders`` name
    # what placeholder tokens stand for (offset, length, content hash: an image), so the
    # same text with different content never shares the blocks that hold it, or any after.
    cache_salt: bytes = b""
    lora_id: int = 0  # the LoRA adapter's id; 0: the base model alone
    placeholders: list[tuple[int, int, bytes]] = field(default_factory=list)
    images: list[ImageInput] = field(default_factory=list)

    status: RequestStatus = RequestStatus.WAITING
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    num_cached_tokens: int = -1  # prefix-cache hit at first scheduling; -1 = not yet
    num_preemptions: int = 0
    stop_reason: int | str | None = None
    block_hashes: list[bytes] = field(default_factory=list)
    # Speculative decoding: the tokens proposed to follow this step's (checked in its forward).
    spec_token_ids: list[int] = field(default_factory=list)
    # Async scheduling: tokens sampled by a step still in flight, which the host learns a
    # step later. The next step already computes them (its inputs come from the device).
    num_output_placeholders: int = 0
    arrival_seq: int = field(default_factory=lambda: next(_arrival_order))

    def __post_init__(self) -> None:
        if self.images and not self.placeholders:
            self.placeholders = [(i.offset, i.length, i.content_hash) for i in self.images]

    @property
    def is_pooling(self) -> bool:
        return self.pooling_params is not None

    @property
    def skip_prefix_cache(self) -> bool:
        """Pooling needs every token's hidden state, prompt logprobs every position's logits."""
        params = self.sampling_params
        return self.is_pooling or (params is not None and params.prompt_logprobs is not None)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        """The tokens a step can compute: the known ones, those in flight, the proposals."""
        return self.num_tokens + self.num_output_placeholders + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    def tokens(self, start: int, end: int) -> list[int]:
        """The known tokens ``start..end``, and 0 for each token in flight (its step's input
        is patched on the device). Proposals are not tokens yet: they are left out."""
        n = len(self.prompt_token_ids)
        if end <= n:
            return self.prompt_token_ids[start:end]
        known = (self.prompt_token_ids + self.output_token_ids)[start:end]
        return known + [0] * min(self.num_output_placeholders, end - start - len(known))

    @property
    def length_reached_in_flight(self) -> bool:
        """Whether the tokens in flight already bring it to ``max_tokens``: it will stop on
        length once they arrive, so no further step is scheduled for it."""
        in_flight = self.num_output_placeholders
        return in_flight > 0 and len(self.output_token_ids) + in_flight >= self.max_tokens

    def block_extra_key(self, start: int, end: int) -> bytes:
        """The content hashes of the placeholders that overlap tokens ``start..end``."""
        return b"".join(h for off, n, h in self.placeholders if off < end and start < off + n)

    @property
    def is_finished(self) -> bool:
        return self.status.finished

    @property
    def finish_reason(self) -> str | None:
        return FINISH_REASONS.get(self.status)

    def set_status(self, status: RequestStatus) -> None:
        """Move to ``status``; finishing is allowed from anywhere, other moves are checked."""
        if self.status.finished:
            raise InternalError(f"request {self.request_id} is already finished")
        if not status.finished and status not in _ALLOWED[self.status]:
            raise InternalError(f"request {self.request_id}: {self.status.name} -> {status.name}")
        self.status = status

    def sort_key(self) -> tuple[int, float, int]:
        """Lower is served first: priority value, then arrival (vLLM's priority policy)."""
        return (self.priority, self.arrival_time, self.arrival_seq)
