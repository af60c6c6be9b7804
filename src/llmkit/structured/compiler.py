"""Compiles structured-output specs once each, within a time limit: a thread-safe LRU cache
over a backend, each compile on a thread of its own."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from llmkit.errors import ParamError
from llmkit.sampling_params import StructuredOutputsParams
from llmkit.structured.backend import CompiledGrammar, StructuredBackend

# How long a request waits for its grammar to compile (vLLM-style flag:
# --structured-outputs-compile-timeout-s); a schema past it is refused.
DEFAULT_COMPILE_TIMEOUT_S = 5.0


class GrammarCompiler:
    """Compiled grammars by spec. The backend is built on first use: building it (the
    tokenizer's vocabulary as the backend sees it) takes a while on large vocabularies, and
    engines that never see a constrained request should not pay for it.

    A compile runs on a daemon thread of its own, and the caller waits for it at most
    ``timeout_s``: past that the request is refused, while the compile finishes in the
    background into the cache (it cannot be stopped midway). Requests for a spec being
    compiled wait for that compile rather than start another; ``compiles`` counts the
    compiles started.
    """

    def __init__(self, make_backend: Callable[[], StructuredBackend], capacity: int = 256):
        self._make_backend = make_backend
        self._backend: StructuredBackend | None = None
        self._cache: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._pending: dict[str, Future[CompiledGrammar]] = {}
        self._capacity = capacity
        self.compiles = 0
        # Requests may be processed on several threads (each LLM, each event loop).
        self._lock = threading.Lock()

    def compile(
        self, spec: StructuredOutputsParams, timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
    ) -> CompiledGrammar:
        """``spec``'s grammar; ``ParamError`` naming the field if it is invalid or does not
        compile within ``timeout_s``."""
        key = spec.key()
        with self._lock:
            grammar = self._cache.get(key)
            if grammar is not None:
                self._cache.move_to_end(key)
                return grammar
            future = self._pending.get(key)
            if future is None:
                if self._backend is None:
                    self._backend = self._make_backend()
                future = self._pending[key] = Future()
                self.compiles += 1
                args = (key, spec, self._backend, future)
                threading.Thread(target=self._build, args=args, daemon=True).start()
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            raise ParamError(
                "structured_outputs",
                f"structured_outputs.{spec.kind} did not compile within {timeout_s:g} s (the "
                "server's --structured-outputs-compile-timeout-s): simplify the schema",
            ) from None

    def _build(
        self,
        key: str,
        spec: StructuredOutputsParams,
        backend: StructuredBackend,
        future: Future[CompiledGrammar],
    ) -> None:
        try:
            grammar = backend.compile(spec)
        except BaseException as exc:  # noqa: BLE001 - the waiting request raises it
            with self._lock:
                self._pending.pop(key, None)
            future.set_exception(exc)
            return
        with self._lock:
            self._pending.pop(key, None)
            self._cache[key] = grammar
            if len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        future.set_result(grammar)
