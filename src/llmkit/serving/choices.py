"""Generation jobs: what completions and chat share once a request is checked and started."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmkit.engine.protocol import OutputStream
from llmkit.outputs import CompletionOutput, PositionLogprobs, RequestOutput
from llmkit.sampling_params import SamplingParams
from llmkit.serving.stream import StreamSettings


@dataclass
class GenerationJob:
    """A checked generation request whose engine requests have started."""

    request_id: str
    model: str
    params: SamplingParams
    streams: list[OutputStream[RequestOutput]]
    options: StreamSettings

    @property
    def stream(self) -> bool:
        return self.options.stream


@dataclass
class JoinedChoice:
    """One choice's deltas, joined for a non-streamed response."""

    prompt_index: int = 0
    pieces: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None

    def add(self, out: CompletionOutput) -> None:
        self.pieces.append(out.text)
        self.token_ids.extend(out.token_ids)
        self.logprobs.extend(out.logprobs or ())
        self.finish_reason = out.finish_reason
        self.stop_reason = out.stop_reason

    @property
    def text(self) -> str:
        return "".join(self.pieces)
