"""One request's outputs from a replica actor, read through Ray's streaming generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from llmkit.engine.output_stream import EngineStream, Output
from llmkit.engine.protocol import TokensPrompt
from llmkit.errors import EngineDeadError, LLMKitError
from llmkit.lora_request import LoRARequest
from llmkit.sampling_params import PoolingParams, SamplingParams


@dataclass
class Submission:
    """A checked request, kept so that it can go to another replica before its first output."""

    request_id: str
    prompt: TokensPrompt
    params: SamplingParams | PoolingParams
    priority: int
    lora_request: LoRARequest | None = None


class ReplicaStream(EngineStream[Output]):
    """``dispatch`` sends the request to a replica and returns ``(replica, actor, generator)``;
    ``lost(replica)`` says that replica died and returns whether another is left; ``done``
    is called once when the stream ends."""

    def __init__(
        self,
        submission: Submission,
        dispatch: Callable[[Submission], tuple[int, Any, Any]],
        lost: Callable[[int], bool],
        done: Callable[[ReplicaStream[Any]], None],
    ):
        self.submission = submission
        self._dispatch, self._lost, self._on_done = dispatch, lost, done
        self.replica, self._actor, self._gen = dispatch(submission)
        self._started = False  # an output came: the request can no longer move
        self._ended = False  # the replica has nothing more to send for it
        super().__init__()

    @property
    def request_id(self) -> str:
        return self.submission.request_id

    async def _next(self) -> Output:
        while True:
            try:
                out: Output = await (await self._gen.__anext__())
            except StopAsyncIteration:
                self._ended = True
                raise
            except RayActorError as exc:
                if not self._lost(self.replica) or self._started:
                    self._ended = True
                    raise EngineDeadError(f"replica {self.replica} died: {exc}") from None
                # Nothing came yet: the request goes to a replica that is alive.
                self.replica, self._actor, self._gen = self._dispatch(self.submission)
                continue
            except RayTaskError as exc:
                self._ended = True
                cause = exc.cause
                if isinstance(cause, (LLMKitError, ValueError)):
                    raise cause from None
                raise
            self._started = True
            self._ended = out.finished
            return out

    def _release(self) -> None:
        if not self._ended:
            self._actor.abort.remote(self.request_id)
            ray.cancel(self._gen)
        self._on_done(self)
