"""The server's own endpoints, each declared once (transports/endpoints.py): probes, this
document, version, metrics, load; with several models, llama-server's router endpoints."""

from __future__ import annotations

from llmkit.protocol.openai import (
    ErrorResponse,
    RouterModelRequest,
    RouterResponse,
    ServerLoadResponse,
    VersionResponse,
)
from llmkit.transports.endpoints import Api, Endpoint
from llmkit.transports.openai.endpoints import ERRORS

_READY = "The model is loaded, the engine healthy, the server not draining."

_ENDPOINTS = (
    Endpoint("/health", "GET", "readyz", "Ready (vLLM's name for /readyz).", errors=(503,),
             ok="Yes.", public=True),
    Endpoint("/livez", "GET", "livez", "The process answers.", errors=(503,), ok="Yes.",
             public=True),
    Endpoint("/readyz", "GET", "readyz", _READY, errors=(503,), ok="Yes.", public=True),
    Endpoint("/openapi.json", "GET", "openapi", "This document.", response="json", public=True),
    Endpoint("/version", "GET", "version", "The server's version.", response=VersionResponse),
    Endpoint("/metrics", "GET", "metrics", "Prometheus metrics.", response="text"),
    Endpoint("/load", "GET", "load", "Requests in flight.", response=ServerLoadResponse),
)  # fmt: skip
# A probe's 503 has no body.
SERVER = Api("server", _ENDPOINTS, {503: "No."}, None)

_ROUTER_ENDPOINTS = (
    Endpoint("/models/load", "POST", "load", "Load a model now (it stays as an idle one).",
             RouterModelRequest, RouterResponse, errors=(400, 404, 500, 503)),
    Endpoint("/models/unload", "POST", "unload",
             "Unload a model now, or when its last request ends.", RouterModelRequest,
             RouterResponse, errors=(400, 404)),
)  # fmt: skip
ROUTER = Api(
    "router",
    _ROUTER_ENDPOINTS,
    {**ERRORS, 500: "The model failed to load (the message names it and why)."},
    ErrorResponse,
)
