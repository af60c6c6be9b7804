"""The OpenAI API over HTTP/SSE (``create_app``, http/) and WebSocket (``/v1/ws``, the chat page
and its Python client, websocket/), with each API's routes in its folder (openai/, anthropic/,
ollama/, llamacpp/, server/) declared once (endpoints.py, apis.py) and ``/openapi.json``
(openapi/), built on serving/; apps import them from :mod:`llmkit.http` and
:mod:`llmkit.websocket`."""
