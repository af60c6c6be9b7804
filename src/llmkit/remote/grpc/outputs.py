"""Engine outputs -> vLLM's GenerateResponse: a ``chunk`` per step with the new ids (streamed),
and a ``complete`` per choice when it ends (with all its ids when not streamed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from smg_grpc_proto import vllm_engine_pb2 as pb

from llmkit.outputs import CompletionOutput, PositionLogprobs, RequestOutput


class ResponseBuilder:
    """Turns one request's outputs into GenerateResponses, keeping each choice's count."""

    def __init__(self, stream: bool, has_prompt_logprobs: bool):
        self.stream = stream
        self.counts: dict[int, int] = {}
        self._prompt_logprobs_due = has_prompt_logprobs

    def responses(self, output: RequestOutput) -> Iterator[Any]:
        prompt_tokens = len(output.prompt_token_ids)
        for choice in output.outputs:
            self.counts[choice.index] = self.counts.get(choice.index, 0) + len(choice.token_ids)
            inputs = self._input_logprobs(output)
            if self.stream and (choice.token_ids or inputs is not None):
                chunk = pb.GenerateStreamChunk(
                    token_ids=choice.token_ids,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=len(choice.token_ids),
                    cached_tokens=output.num_cached_tokens,
                    index=choice.index,
                )
                _set_logprobs(chunk.output_logprobs, choice)
                _set_input_logprobs(chunk.input_logprobs, output.prompt_token_ids, inputs)
                yield pb.GenerateResponse(chunk=chunk)
            if choice.finish_reason is not None:
                yield pb.GenerateResponse(complete=self._complete(output, choice, inputs))

    def _input_logprobs(self, output: RequestOutput) -> list[PositionLogprobs | None] | None:
        # Sent once, with the first response that goes out.
        if not self._prompt_logprobs_due or output.prompt_logprobs is None:
            return None
        self._prompt_logprobs_due = False
        return output.prompt_logprobs

    def _complete(
        self,
        output: RequestOutput,
        choice: CompletionOutput,
        inputs: list[PositionLogprobs | None] | None,
    ) -> Any:
        complete = pb.GenerateComplete(
            # Streamed, the ids went out in the chunks already.
            output_ids=[] if self.stream else choice.token_ids,
            finish_reason=choice.finish_reason or "stop",
            prompt_tokens=len(output.prompt_token_ids),
            completion_tokens=self.counts.get(choice.index, 0),
            cached_tokens=output.num_cached_tokens,
            index=choice.index,
        )
        if isinstance(choice.stop_reason, str):
            complete.matched_stop_str = choice.stop_reason
        elif isinstance(choice.stop_reason, int):
            complete.matched_token_id = choice.stop_reason
        if not self.stream:
            _set_logprobs(complete.output_logprobs, choice)
            _set_input_logprobs(complete.input_logprobs, output.prompt_token_ids, inputs)
        return complete


def _set_logprobs(target: Any, choice: CompletionOutput) -> None:
    for token_id, position in zip(choice.token_ids, choice.logprobs or [], strict=False):
        target.token_ids.append(token_id)
        target.token_logprobs.append(position[token_id].logprob)
        target.top_logprobs.append(_top(position))


def _set_input_logprobs(
    target: Any, prompt_ids: list[int], inputs: list[PositionLogprobs | None] | None
) -> None:
    if inputs is None:
        return
    target.token_ids.extend(prompt_ids)
    for token_id, position in zip(prompt_ids, inputs, strict=False):
        # The first prompt token has no logprob.
        value = position[token_id].logprob if position and token_id in position else None
        entry = target.token_logprobs.add()
        if value is not None:
            entry.value = value
        target.top_logprobs.append(_top(position or {}))


def _top(position: PositionLogprobs) -> Any:
    ranked = sorted(position.items(), key=lambda item: item[1].rank or 0)
    return pb.TopLogProbs(
        values=[lp.logprob for _, lp in ranked], token_ids=[tid for tid, _ in ranked]
    )
