"""Mount llmkit's OpenAI app inside an existing Starlette service (FastAPI works the same way).

python examples/mount_in_fastapi_or_starlette.py --model demo --port 8000
curl localhost:8000/status
curl localhost:8000/llm/v1/models
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from llmkit import AsyncEngine, EngineConfig
from llmkit.http import create_app


def build_app(model: str) -> Starlette:
    engine = AsyncEngine(EngineConfig(model=model))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Starlette does not run a mounted app's lifespan: the outer service owns the engine.
        async with engine:
            yield

    async def status(request: Request) -> JSONResponse:
        return JSONResponse({"service": "my-service", "llm_healthy": engine.is_healthy()})

    return Starlette(
        routes=[
            Route("/status", status),
            # Clients use base_url=http://host:port/llm/v1 with the official openai client.
            Mount("/llm", app=create_app(engine, served_model_name="my-model")),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(build_app(args.model), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
