"""The one table of the HTTP app's endpoints: every wire API's declarations, and which of them
a server serves. ``create_app`` mounts these and ``/openapi.json`` documents these."""

from __future__ import annotations

from starlette.routing import compile_path

from llmkit.serving.context import ServingContext
from llmkit.transports.anthropic.endpoints import ANTHROPIC
from llmkit.transports.endpoints import Api, ErrorShape
from llmkit.transports.llamacpp.endpoints import LLAMACPP
from llmkit.transports.ollama.endpoints import OLLAMA
from llmkit.transports.openai.endpoints import LORA_UPDATES, OPENAI
from llmkit.transports.server.endpoints import ROUTER, SERVER

APIS = (OPENAI, LORA_UPDATES, ANTHROPIC, OLLAMA, LLAMACPP, SERVER, ROUTER)
# The paths that need no API key and are never rate limited.
PUBLIC_PATHS = frozenset(e.path for api in APIS for e in api.endpoints if e.public)
# The paths a line of `llmkit run-batch` may name.
BATCH_PATHS = tuple(e.path for api in APIS for e in api.endpoints if e.batch)
# The paths of the APIs with an error shape of their own, as Starlette matches them.
_OWN_ERRORS = tuple(
    (compile_path(e.path)[0], api.error) for api in APIS if api.error for e in api.endpoints
)


def error_shape(path: str) -> ErrorShape | None:
    """How an error reads on ``path``: its API's own shape, or None for OpenAI's."""
    return next((shape for pattern, shape in _OWN_ERRORS if pattern.match(path)), None)


def served(ctx: ServingContext) -> list[Api]:
    """The APIs of the app of ``ctx``: runtime LoRA updates where enabled, the router's
    endpoints with several models."""
    return [
        api
        for api in APIS
        if (api is not LORA_UPDATES or ctx.loras.runtime_updates)
        and (api is not ROUTER or ctx.models is not None)
    ]
