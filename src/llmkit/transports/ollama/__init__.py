"""Ollama's API (/api/*, NDJSON streams) beside OpenAI's, on the same app and models."""

from llmkit.transports.ollama.endpoints import OLLAMA
from llmkit.transports.ollama.routes import OllamaRoutes

__all__ = ["OLLAMA", "OllamaRoutes"]
