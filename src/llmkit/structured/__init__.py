"""Structured outputs: grammars that constrain sampling, behind a small backend interface."""

from llmkit.structured.backend import CompiledGrammar, GrammarMatcher, StructuredBackend
from llmkit.structured.compiler import GrammarCompiler

__all__ = ["CompiledGrammar", "GrammarCompiler", "GrammarMatcher", "StructuredBackend"]
