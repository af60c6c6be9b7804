"""Pydantic models of the wire protocols (the OpenAI API)."""
