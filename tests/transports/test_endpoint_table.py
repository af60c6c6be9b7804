"""create_app mounts what /openapi.json documents and documents what it mounts: both read the
one table of endpoints (llmkit.transports.apis), on a real server on a free port."""

from __future__ import annotations

import re

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from llmkit import AsyncEngine, EngineConfig
from llmkit.http import AppOptions, create_app
from llmkit.models import ModelManager, ModelSettings
from llmkit.transports.apis import APIS
from llmkit.transports.endpoints import Api
from llmkit.transports.server.endpoints import ROUTER
from serve_helpers import running

LORA_UPDATES_ON = AppOptions(enable_lora_runtime_updates=True)

Operation = tuple[str, str]  # (path as documented, method)


def mounted(app: Starlette) -> set[Operation]:
    """The app's HTTP operations (HEAD aside: Starlette adds it to every GET)."""
    return {
        (re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path), method)
        for route in app.routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }


def documented(url: str) -> set[Operation]:
    paths = httpx.get(f"{url}/openapi.json", timeout=30).json()["paths"]
    return {(path, method.upper()) for path, ops in paths.items() for method in ops}


def declared(
    task: str | None = None, apis: tuple[Api, ...] = APIS, capabilities: tuple[str, ...] = ()
) -> set[Operation]:
    """The table's operations of ``apis``: for a model of ``task`` with ``capabilities``
    (``insert``: it fills in the middle), or for any (None)."""
    return {
        (e.documented_path, e.method)
        for api in apis
        for e in api.endpoints
        if task is None
        or (e.task in (None, task) and (e.capability is None or e.capability in capabilities))
    }


def unrouted(url: str, operations: set[Operation]) -> list[str]:
    """The operations the server has no route for (Starlette's 404 "Not Found", or a 405).
    Each asks for a model that is not served, so that nothing loads or generates."""
    missed = []
    with httpx.Client(base_url=url, timeout=60) as http:
        for path, method in sorted(operations):
            body = {"json": {"model": "not-served"}} if method == "POST" else {}
            response = http.request(method, re.sub(r"[{}]", "", path), **body)
            status = response.status_code
            if status == 405 or (status == 404 and "Not Found" in response.text):
                missed.append(f"{method} {path}: {status} {response.text[:80]}")
    return missed


@pytest.fixture(scope="module")
def manager_app(tiny_model) -> Starlette:
    models = ModelManager(
        [ModelSettings.of("tiny", tiny_model), ModelSettings.of("other", tiny_model)]
    )
    return create_app(models, LORA_UPDATES_ON, owns_engine=True)


def test_a_server_of_several_models_documents_exactly_what_it_mounts(manager_app):
    with running(manager_app) as url:
        operations = documented(url)
        assert operations == mounted(manager_app)
        assert operations == declared()  # every endpoint of the table
        assert unrouted(url, operations) == []


def test_one_model_documents_what_it_mounts_for_its_task(tiny_model):
    engine = AsyncEngine(EngineConfig(model=tiny_model, max_model_len=64))
    app = create_app(engine, LORA_UPDATES_ON, owns_engine=True)
    with running(app) as url:
        operations = documented(url)
        one_model = tuple(api for api in APIS if api is not ROUTER)
        assert operations == declared("generate", one_model)
        # Mounted and left out of the document: the endpoints of embedding models, and those
        # of a model that fills in the middle (/infill), which answer this one with an error.
        assert mounted(app) - operations == declared() - declared("generate")
        assert declared("generate", one_model, ("insert",)) - operations == {("/infill", "POST")}
        assert operations <= mounted(app)
        assert unrouted(url, operations) == []
