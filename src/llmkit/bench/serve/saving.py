"""Where a ``bench serve`` result goes: vLLM's file name, JSON (appended as a new line with
``append_result``), and the latency chart beside it as an SVG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmkit.bench.serve.chart import latency_svg
from llmkit.bench.serve.options import BenchServeOptions


def result_path(result: dict[str, Any], o: BenchServeOptions) -> Path:
    """``{label}-{rate}qps[-concurrency{n}]-{model}-{date}.json`` in ``result_dir``, as
    vLLM names it, or ``result_filename``."""
    if o.result_filename:
        name = o.result_filename
    else:
        model = str(result["model_id"]).rstrip("/").split("/")[-1]
        concurrency = f"-concurrency{o.max_concurrency}" if o.max_concurrency is not None else ""
        label = o.label or o.backend
        name = f"{label}-{o.request_rate}qps{concurrency}-{model}-{result['date']}.json"
    return Path(o.result_dir or ".") / name


def save(
    result: dict[str, Any], samples: dict[str, list[float]], o: BenchServeOptions
) -> list[Path]:
    """The files written: the JSON where asked (``save_result``, ``append_result``), the
    chart (``plot``) beside it with ``.svg`` for ``.json``."""
    path = result_path(result, o)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    if o.save_result or o.append_result:
        with path.open("a+" if o.append_result else "w", encoding="utf-8") as out:
            if o.append_result and out.tell() != 0:
                out.write("\n")
            json.dump(result, out)
        written.append(path)
    if o.plot:
        svg = path.with_suffix(".svg")
        concurrency = result["max_concurrency"] or "unbounded"
        title = (
            f"{result['model_id']}: {result['completed']} requests, {result['request_rate']} "
            f"req/s, concurrency {concurrency} ({result['label'] or result['backend']})"
        )
        svg.write_text(latency_svg(samples, title), encoding="utf-8")
        written.append(svg)
    return written
