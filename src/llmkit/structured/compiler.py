"""Compiles structured-output specs once each: a thread-safe LRU cache over a backend."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from llmkit.sampling_params import StructuredOutputsParams
from llmkit.structured.backend import CompiledGrammar, StructuredBackend


class GrammarCompiler:
    """Compiled grammars by spec. The backend is built on first use: building it (the
    tokenizer's vocabulary as the backend sees it) takes a while on large vocabularies, and
    engines that never see a constrained request should not pay for it."""

    def __init__(self, make_backend: Callable[[], StructuredBackend], capacity: int = 256):
        self._make_backend = make_backend
        self._backend: StructuredBackend | None = None
        self._cache: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._capacity = capacity
        # Requests may be processed on several threads (each LLM, each event loop).
        self._lock = threading.Lock()

    def compile(self, spec: StructuredOutputsParams) -> CompiledGrammar:
        key = spec.key()
        with self._lock:
            grammar = self._cache.get(key)
            if grammar is not None:
                self._cache.move_to_end(key)
                return grammar
            if self._backend is None:
                self._backend = self._make_backend()
            backend = self._backend
        grammar = backend.compile(spec)
        with self._lock:
            self._cache[key] = grammar
            if len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        return grammar
