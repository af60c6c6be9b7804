"""Transports in front of the engine protocol: the OpenAI HTTP app (SSE)."""
