"""Structured outputs: grammars that constrain sampling, behind a small backend interface."""

from llmkit.structured.backend import CompiledGrammar, GrammarMatcher, StructuredBackend
from llmkit.structured.compiler import DEFAULT_COMPILE_TIMEOUT_S, GrammarCompiler

__all__ = [
    "DEFAULT_COMPILE_TIMEOUT_S",
    "CompiledGrammar",
    "GrammarCompiler",
    "GrammarMatcher",
    "StructuredBackend",
]
