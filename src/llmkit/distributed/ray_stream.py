"""One request's outputs from a replica actor, read through Ray's streaming generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError

from llmkit.engine.protocol import EngineOutput, TokensPrompt
from llmkit.errors import EngineDeadError, LLMKitError
from llmkit.lora_request import LoRARequest
from llmkit.sampling_params import PoolingParams, SamplingParams

T = TypeVar("T", bound=EngineOutput)


@dataclass
class Submission:
    """A checked request, kept so that it can go to another replica before its first output."""

    request_id: str
    prompt: TokensPrompt
    params: SamplingParams | PoolingParams
    priority: int
    lora_request: LoRARequest | None = None


class ReplicaStream(Generic[T]):
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
        self._dispatch, self._lost, self._done = dispatch, lost, done
        self.replica, self._actor, self._gen = dispatch(submission)
        self._started = False  # an output came: the request can no longer move
        self._finished = False

    @property
    def request_id(self) -> str:
        return self.submission.request_id

    def __aiter__(self) -> ReplicaStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._finished:
            raise StopAsyncIteration
        while True:
            try:
                out: T = await (await self._gen.__anext__())
            except StopAsyncIteration:
                self._finish()
                raise
            except RayActorError as exc:
                if not self._lost(self.replica) or self._started:
                    self._finish()
                    raise EngineDeadError(f"replica {self.replica} died: {exc}") from None
                # Nothing came yet: the request goes to a replica that is alive.
                self.replica, self._actor, self._gen = self._dispatch(self.submission)
                continue
            except RayTaskError as exc:
                self._finish()
                cause = exc.cause
                if isinstance(cause, (LLMKitError, ValueError)):
                    raise cause from None
                raise
            self._started = True
            return out

    def _finish(self) -> None:
        if not self._finished:
            self._finished = True
            self._done(self)

    def close(self) -> None:
        """Abort the request on its replica if it still runs; needs no event loop."""
        if not self._finished:
            self._actor.abort.remote(self.request_id)
            ray.cancel(self._gen)
            self._finish()

    async def aclose(self) -> None:
        self.close()
