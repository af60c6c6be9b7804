"""Ollama's API on the engine: requests to engine calls and back (convert.py, api.py), and the
models it lists and shows (models.py)."""
