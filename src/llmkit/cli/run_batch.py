"""``llmkit run-batch``: OpenAI's batch file format run offline. Each input line's request
goes through the server's own routes (the app in process, no port), all at once so the
engine batches them; each output line holds its answer or its error, in input order."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any, TextIO

from llmkit.cli.flags import add_engine_flags, engine_config


def add_parser(commands: argparse._SubParsersAction) -> None:
    batch = commands.add_parser(
        "run-batch", help="run a file of requests in OpenAI's batch format (JSONL)"
    )
    batch.add_argument("-i", "--input-file", required=True, help="the requests, or - for stdin")
    batch.add_argument("-o", "--output-file", required=True, help="the results, or - for stdout")
    batch.add_argument(
        "--model", default=None, help="a model directory, a GGUF file, 'smollm2' or 'demo'"
    )
    batch.add_argument(
        "--served-model-name", nargs="+", default=None, help="the names lines use in model"
    )
    batch.add_argument(
        "--max-concurrency", type=int, default=256, help="requests in flight at once"
    )
    batch.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="the log level (default: warning)",
    )
    add_engine_flags(batch)
    batch.set_defaults(handler=run_batch_command)


def run_batch_command(args: argparse.Namespace) -> int:
    import anyio

    if args.model is None:
        from llmkit.model.names import default_model

        args.model = default_model()
    lines = _read(args.input_file)
    results = anyio.run(_run_all, args, lines)
    if args.output_file == "-":
        _write(sys.stdout, results)
    else:
        with open(args.output_file, "w", encoding="utf-8") as out:
            _write(out, results)
    return 0


async def _run_all(args: argparse.Namespace, lines: list[str]) -> list[dict[str, Any]]:
    import anyio
    import httpx
    from tqdm.auto import tqdm

    from llmkit.engine.async_engine import AsyncEngine
    from llmkit.http import create_app

    results: list[dict[str, Any]] = [{} for _ in lines]
    limiter = anyio.CapacityLimiter(max(1, args.max_concurrency))
    async with AsyncEngine(engine_config(args.model, args)) as engine:
        app = create_app(engine, served_model_name=args.served_model_name)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://batch") as http:
            with tqdm(total=len(lines), desc="Running batch", unit="req") as bar:

                async def one(i: int) -> None:
                    async with limiter:
                        results[i] = await _run_line(http, lines[i])
                    bar.update(1)

                async with anyio.create_task_group() as tg:
                    for i in range(len(lines)):
                        tg.start_soon(one, i)
    return results


async def _run_line(http: Any, line: str) -> dict[str, Any]:
    """One output line: the answer's status and body, or the error that kept it from running."""
    result: dict[str, Any] = {"id": f"batch_req_{uuid.uuid4().hex}", "custom_id": None}
    try:
        request = json.loads(line)
    except json.JSONDecodeError as exc:
        return result | _error("invalid_json", f"the line is not valid JSON: {exc}")
    if not isinstance(request, dict):
        return result | _error("invalid_request", "the line must be a JSON object")
    result["custom_id"] = request.get("custom_id")
    problem = _check(request)
    if problem is not None:
        return result | _error("invalid_request", problem)
    response = await http.post(request["url"], json=request["body"])
    return result | {
        "response": {
            "status_code": response.status_code,
            "request_id": response.headers.get("x-request-id"),
            "body": response.json(),
        },
        "error": None,
    }


def _check(request: dict[str, Any]) -> str | None:
    """What makes the line unrunnable, naming the field; None if nothing does."""
    from llmkit.transports.apis import BATCH_PATHS

    if not isinstance(request.get("custom_id"), str):
        return "custom_id must be a string"
    if request.get("method", "POST") != "POST":
        return f"method must be POST, got {request.get('method')!r}"
    if request.get("url") not in BATCH_PATHS:
        return f"url must be one of {', '.join(BATCH_PATHS)}, got {request.get('url')!r}"
    body = request.get("body")
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if body.get("stream"):
        return "body.stream must be false: batch answers are whole"
    return None


def _error(code: str, message: str) -> dict[str, Any]:
    return {"response": None, "error": {"code": code, "message": message}}


def _read(path: str) -> list[str]:
    if path == "-":
        text = sys.stdin.read()
    else:
        with open(path, encoding="utf-8") as source:
            text = source.read()
    return [line for line in text.splitlines() if line.strip()]


def _write(out: TextIO, results: list[dict[str, Any]]) -> None:
    for result in results:
        out.write(json.dumps(result) + "\n")
