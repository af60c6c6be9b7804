"""create_app(engine) -> an OpenAI-compatible Starlette app (JSON and Server-Sent Events).

The app can run on its own (``llmkit serve``) or be mounted inside another Starlette or
FastAPI app::

    outer.mount("/llm", create_app(engine))

It does not start or stop the engine unless ``owns_engine=True``: a mounted app's
lifespan never runs, so the outer app manages the engine (``async with engine``).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute, WebSocketRoute

from llmkit.engine.protocol import EngineProtocol
from llmkit.manager.manager import ModelManager
from llmkit.serving.context import ServingContext
from llmkit.serving.lora import ServedLoRAs
from llmkit.serving.metrics import ServerMetrics
from llmkit.serving.models_metrics import ModelsCollector
from llmkit.transports.anthropic.endpoints import ANTHROPIC
from llmkit.transports.anthropic.routes import AnthropicRoutes
from llmkit.transports.apis import PUBLIC_PATHS, error_shape, served
from llmkit.transports.endpoints import routes as api_routes
from llmkit.transports.http.answers import ERROR_HANDLERS
from llmkit.transports.http.body import RequestBodyLimitMiddleware
from llmkit.transports.http.jobs import Jobs
from llmkit.transports.http.limits import RateLimitMiddleware
from llmkit.transports.http.middleware import (
    ApiKeyMiddleware,
    ApiKeys,
    LoadTrackingMiddleware,
    RequestContextMiddleware,
    ServerLoad,
)
from llmkit.transports.http.ui import PAGE_PATHS, ui_routes
from llmkit.transports.llamacpp import LLAMACPP, LlamaCppRoutes
from llmkit.transports.ollama import OLLAMA, OllamaRoutes
from llmkit.transports.openai.endpoints import LORA_UPDATES, OPENAI
from llmkit.transports.openai.routes import OpenAIRoutes
from llmkit.transports.openapi.document import openapi_document
from llmkit.transports.options import AppOptions
from llmkit.transports.server.endpoints import ROUTER, SERVER
from llmkit.transports.server.router import ModelRoutes
from llmkit.transports.server.routes import ServerRoutes
from llmkit.transports.websocket.endpoint import WebSocketEndpoint


def create_app(
    engine: EngineProtocol | ModelManager,
    options: AppOptions | None = None,
    *,
    served_model_name: str | Sequence[str] | None = None,
    owns_engine: bool = False,
) -> Starlette:
    """The OpenAI routes for ``engine``, or for each model of a :class:`ModelManager`
    (requests name theirs in ``model``; ``POST /models/load`` and ``/models/unload`` too).

    Parameters:

    * ``options``: how the app serves it (:class:`AppOptions`: chat template, chat page,
      answers, keys and CORS, HTTP limits, WebSocket limits, rate limits, middleware, LoRA
      adapters); its defaults answer as OpenAI's API does, without the chat page.
    * ``served_model_name``: the name(s) clients use (default: the engine's model).
    * ``owns_engine``: start the engine with the app's lifespan and shut it down after.

    The serving context is ``app.state.serving``: set its ``draining`` to refuse new work
    (``/readyz`` and ``/health`` then answer 503); ``app.state.load.in_flight`` counts the
    requests in flight (POSTs and WebSocket requests); when it will wait no longer, call
    ``app.state.serving.closing.set()`` (from the event loop) and every request still
    running ends itself at once, each with a whole answer: a stream with an error event
    (type ``service_unavailable``) and ``[DONE]``, a WebSocket request with its ``error``
    and ``done``, any other with a 503. ``llmkit serve`` does both on SIGTERM (closing at
    ``--shutdown-timeout``). A mounted app has no lifespan: the outer app's server does it,
    before it cancels what still runs.
    """
    options = options or AppOptions()
    access, http = options.access, options.http
    models = engine if isinstance(engine, ModelManager) else None
    if models is not None:
        names = models.names
    elif isinstance(served_model_name, str):
        names = [served_model_name]
    else:
        names = list(served_model_name or []) or [engine.model_info.name]
    metrics = ServerMetrics(engine)
    if models is not None:
        metrics.registry.register(ModelsCollector(models))
    ctx = ServingContext(
        engine=engine,
        model_names=names,
        chat_template=options.chat_template,
        log_prompts=http.log_prompts,
        max_log_len=http.max_log_len,
        metrics=metrics,
        options=options.serving,
        loras=ServedLoRAs(options.lora_modules, options.enable_lora_runtime_updates),
        models=models,
    )
    load = ServerLoad()
    jobs = Jobs(ctx, http.sse_keepalive_s)
    server = ServerRoutes(ctx, metrics, load, http.enable_server_load_tracking, openapi_document)
    keys = ApiKeys(access.keys)
    origins = access.allowed_origins
    # Each API's handlers: an object whose methods its declarations name.
    openai = OpenAIRoutes(jobs)
    handlers: dict[str, object] = {
        OPENAI.name: openai,
        LORA_UPDATES.name: openai,
        ANTHROPIC.name: AnthropicRoutes(jobs),
        OLLAMA.name: OllamaRoutes(ctx),
        LLAMACPP.name: LlamaCppRoutes(jobs),
        SERVER.name: server,
    }
    if models is not None:
        handlers[ROUTER.name] = ModelRoutes(ctx, models)
    routes: list[BaseRoute] = []
    for api in served(ctx):
        routes += api_routes(api, handlers[api.name])
    ws = WebSocketEndpoint(ctx, keys, origins, options.websocket, load)
    routes.append(WebSocketRoute("/v1/ws", ws.handle))
    if options.ui:
        routes += ui_routes()
    stack = [_as_middleware(item) for item in reversed(options.middleware)]
    if origins:
        stack.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(origins),
                allow_methods=list(access.allowed_methods),
                allow_headers=list(access.allowed_headers),
                allow_credentials=access.allow_credentials,
                expose_headers=["x-request-id"],
            )
        )
    stack.append(Middleware(RequestContextMiddleware, access_log=http.access_log))
    stack.append(
        Middleware(
            RequestBodyLimitMiddleware,
            max_bytes=http.max_request_body_bytes,
            timeout_s=http.request_body_timeout_s,
        )
    )
    # Probes and the API's description need no key, as load balancers and tools read them.
    probes = PUBLIC_PATHS | (PAGE_PATHS if options.ui else set())
    if keys:
        # Load balancers probe /load as they probe /metrics: without a key unless told.
        open_paths = probes if access.metrics_require_api_key else probes | {"/metrics", "/load"}
        stack.append(
            Middleware(
                ApiKeyMiddleware,
                keys=keys,
                open_paths=frozenset(open_paths),
                error_shape=error_shape,
            )
        )
        server.open_paths = frozenset(open_paths)
    if options.rate_limits.enabled:
        stack.append(
            Middleware(
                RateLimitMiddleware,
                limits=options.rate_limits,
                open_paths=frozenset(probes | {"/metrics", "/load"}),
                on_limit=lambda key, limit: metrics.rate_limited.labels(key, limit).inc(),
            )
        )
    # Always counted: a draining server waits for this to reach 0.
    stack.append(Middleware(LoadTrackingMiddleware, load=load))
    app = Starlette(
        routes=routes,
        middleware=stack,
        exception_handlers=ERROR_HANDLERS,
        lifespan=_engine_lifespan(engine) if owns_engine else None,
    )
    app.state.serving = ctx
    app.state.load = load
    return app


def _as_middleware(item: Middleware | Callable[..., Any]) -> Middleware:
    if isinstance(item, Middleware):
        return item
    if inspect.iscoroutinefunction(item):
        return Middleware(BaseHTTPMiddleware, dispatch=item)
    return Middleware(item)


def _engine_lifespan(
    engine: EngineProtocol | ModelManager,
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with engine:
            yield

    return lifespan
