"""Anthropic's Messages API on the engine: a request to a chat (convert.py) and its answer
and stream back (messages.py)."""
