"""The HTTP app's OpenAPI document, generated from the one table of its endpoints
(transports/apis.py) and the pydantic models of protocol/.

Nothing here is written by hand: each operation comes from its endpoint's declaration
(transports/endpoints.py), request and response schemas from the models
(``models_json_schema``), fitted to the served model (openapi_fit), and the document lists
the routes this app serves (embeddings only for an embedding model, generation only for a
generating one), the statuses each can answer, and API keys only where the server asks for
them, so that a client or a fuzzer holding the server to its document finds the two agree.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

import llmkit
from llmkit.serving.context import ServingContext
from llmkit.transports.apis import APIS, served
from llmkit.transports.endpoints import Endpoint, operations, schema_models
from llmkit.transports.openapi.fit import fit_schemas

_REF = "#/components/schemas/{model}"


def openapi_document(
    names: list[str], ctx: ServingContext, open_paths: frozenset[str] | None
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``create_app``'s routes for the served model's names
    (any other name is a 404) and limits; ``open_paths``: the paths that need no API key
    (None: the server takes no keys)."""
    # Several models: no one model's limits fit every request, and every route is served.
    info = None if ctx.models is not None else ctx.engine.model_info
    refs, top = models_json_schema(schema_models(APIS), ref_template=_REF)
    schemas: dict[str, Any] = top.get("$defs", {})
    for schema in schemas.values():
        if schema.get("title", "").endswith("Request") and "model" in schema["properties"]:
            # Ollama's and the router's requests must name their model; OpenAI's default to
            # the first, when they leave it out or name "" (as vLLM takes it).
            if "model" in schema.get("required", ()):
                schema["properties"]["model"] = {"enum": names}
            else:
                schema["properties"]["model"] = {
                    "anyOf": [{"enum": [*names, ""]}, {"type": "null"}],
                    "default": None,
                }
    if info is not None:
        fit_schemas(schemas, ctx, info)

    def ref(model: type[BaseModel], mode: JsonSchemaMode = "serialization") -> dict[str, Any]:
        return dict(refs[(model, mode)])

    paths: dict[str, Any] = {}
    for api in served(ctx):
        endpoints = [e for e in api.endpoints if info is None or _serves(ctx, info.task, e)]
        paths |= operations(api, endpoints, ref, open_paths)
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "llmkit", "version": llmkit.__version__},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if open_paths is not None:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
        for path in open_paths & paths.keys():
            for operation in paths[path].values():
                operation["security"] = []
    return document


def _serves(ctx: ServingContext, task: str, endpoint: Endpoint) -> bool:
    """Whether the one served model serves ``endpoint``: its task, and its capability."""
    if endpoint.task not in (None, task):
        return False
    return endpoint.capability is None or not ctx.engine.tokenizer.fim.missing
