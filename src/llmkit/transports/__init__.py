"""The OpenAI API over HTTP/SSE and WebSocket (``/v1/ws``, the chat page and its Python client,
websocket/): ``create_app`` (app.py) puts together each API's routes, from its folder
(openai/, anthropic/, ollama/, llamacpp/, server/) and declared once (endpoints.py, apis.py),
on what they share (http/), with ``/openapi.json`` (openapi/); built on serving/. Apps
import them from :mod:`llmkit.http` and :mod:`llmkit.websocket`."""
