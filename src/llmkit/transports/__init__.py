"""The OpenAI API over HTTP/SSE (``create_app``) and WebSocket (``/v1/ws``, the chat page and
its Python client), built on serving/; apps import them from :mod:`llmkit.http` and
:mod:`llmkit.websocket`."""
