"""The wire, as plain data: pydantic models of the OpenAI API (openai/), the ``/v1/ws``
messages (websocket.py) and the message checks every non-HTTP protocol shares (messages.py)."""
