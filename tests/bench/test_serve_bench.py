"""`llmkit bench serve`: vLLM's `bench serve` flags and result JSON, against llmkit's server
and against a second, stub server (chat completions, no usage chunk, one failing request)."""

from __future__ import annotations

import json
import random
import re
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import anyio
import anyio.abc
import httpx
import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from llmkit.bench.serve.client import RequestInput, RequestOutput, send
from llmkit.bench.serve.datasets import random_requests
from llmkit.bench.serve.metrics import calculate, percentile
from llmkit.bench.serve.runner import arrival_times, load_tokenizer
from llmkit.cli import main
from serve_helpers import running

# vLLM's result keys (vllm/benchmarks/serve.py) for --save-detailed, --percentile-metrics
# ttft,tpot,itl,e2el and --metric-percentiles 50,99: written out, not derived from the code.
VLLM_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls",
    "generated_texts", "errors", "max_output_tokens_per_s", "max_concurrent_requests",
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
      for stat in ("mean", "median", "std", "p50", "p99")),
}  # fmt: skip
DETAILED = {"input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"}


def test_percentile_is_numpys_linear_percentile():
    rng = random.Random(3)
    for n in (1, 2, 7, 100):
        values = [rng.expovariate(1.0) for _ in range(n)]
        for p in (0, 1, 50, 90, 99, 99.9, 100):
            assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_arrivals_all_at_once_evenly_or_poisson_ending_on_schedule():
    rng = random.Random(0)
    assert arrival_times(5, float("inf"), 1.0, rng) == [0.0] * 5
    even = arrival_times(4, 2.0, float("inf"), rng)
    assert even == pytest.approx([0.5, 1.0, 1.5, 2.0])
    for burstiness in (0.5, 1.0, 4.0):
        times = arrival_times(200, 10.0, burstiness, rng)
        assert times == sorted(times)
        assert times[-1] == pytest.approx(20.0)  # num_prompts / request_rate, as vLLM scales
    gaps = np.diff(arrival_times(2000, 10.0, 0.25, rng))
    assert np.std(gaps) / np.mean(gaps) > 1.5  # burstier than Poisson's 1.0


def test_random_prompts_have_the_lengths_they_claim(tiny_model):
    tokenizer = load_tokenizer(tiny_model)
    requests = random_requests(
        tokenizer, 12, input_len=40, output_len=10, range_ratio=0.5, prefix_len=5, seed=7
    )
    assert requests == random_requests(
        tokenizer, 12, input_len=40, output_len=10, range_ratio=0.5, prefix_len=5, seed=7
    )
    for r in requests:
        assert r.prompt_len == len(tokenizer(r.prompt, add_special_tokens=False).input_ids)
        assert 5 + 20 - 3 <= r.prompt_len <= 5 + 60  # a re-encode may merge a few tokens
        assert 5 <= r.expected_output_len <= 15
    assert len({r.prompt_len for r in requests}) > 1
    assert [r.request_id for r in requests[:2]] == ["0", "1"]


def test_metrics_from_known_timings():
    def out(start, ttft, itl, tokens, success=True):
        latency = ttft + sum(itl)
        return RequestOutput("x", success, latency, tokens, ttft, itl, 10, "", start)

    outputs = [
        out(0.0, 0.1, [0.05, 0.05, 0.05], 4),
        out(0.0, 0.3, [0.1], 2),
        out(0.5, 0.2, [], 1),
        out(0.0, 0.0, [], 0, success=False),
    ]
    result, lens, samples = calculate(
        outputs, 2.0, len, ["ttft", "tpot", "itl", "e2el"], [50, 99], {"ttft": 250}
    )
    assert lens == [4, 2, 1, 0]
    assert (result["completed"], result["failed"]) == (3, 1)
    assert result["total_input_tokens"] == 30 and result["total_output_tokens"] == 7
    assert result["output_throughput"] == pytest.approx(3.5)
    assert result["request_goodput"] == pytest.approx(1.0)  # two of three under 250 ms TTFT
    assert result["mean_ttft_ms"] == pytest.approx(200.0)
    # TPOT: (latency - ttft) / (tokens - 1), for requests of more than one token.
    assert result["mean_tpot_ms"] == pytest.approx(statistics.fmean([50.0, 100.0]))
    assert result["median_itl_ms"] == pytest.approx(50.0)
    assert result["std_e2el_ms"] == pytest.approx(float(np.std([0.25, 0.4, 0.2])) * 1e3)
    assert result["p99_e2el_ms"] == pytest.approx(float(np.percentile([0.25, 0.4, 0.2], 99)) * 1e3)
    assert (result["max_output_tokens_per_s"], result["max_concurrent_requests"]) == (7.0, 3)
    assert samples["itl"] == [0.05, 0.05, 0.05, 0.1]


def _bench(tmp_path: Path, *flags: str) -> tuple[dict, Path]:
    assert main(["bench", "serve", "--disable-tqdm", "--save-result", "--plot",
                 "--result-dir", str(tmp_path), *flags]) == 0  # fmt: skip
    [path] = tmp_path.glob("*.json")
    return json.loads(path.read_text()), path


def test_against_llmkit_in_vllms_keys_and_units(server, tiny_model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # the session server asks for one
    result, path = _bench(
        tmp_path, "--base-url", server.url, "--tokenizer", tiny_model, "--num-prompts", "6",
        "--random-input-len", "24", "--random-output-len", "5", "--max-concurrency", "3",
        "--save-detailed", "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,99", "--metadata", "peer=none",
    )  # fmt: skip
    assert set(result) == VLLM_KEYS | {"peer"}
    assert path.name.startswith("openai-infqps-concurrency3-tiny-")
    assert (result["completed"], result["failed"], result["model_id"]) == (6, 0, "tiny")
    assert result["output_lens"] == [5] * 6  # the random dataset ignores EOS, as vLLM's
    assert sum(result["input_lens"]) == result["total_input_tokens"]
    assert all(0 < t < result["duration"] for t in result["ttfts"])  # seconds
    assert result["mean_ttft_ms"] == pytest.approx(statistics.fmean(result["ttfts"]) * 1e3)
    # A gap per chunk after the first (a chunk may carry more than one token).
    assert all(len(gaps) <= 4 for gaps in result["itls"]) and any(result["itls"])
    assert result["request_rate"] == "inf" and result["max_concurrency"] == 3
    assert "Serving Benchmark Result" in capsys.readouterr().out
    svg = ET.parse(path.with_suffix(".svg")).getroot()
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 4


def _stub_chat() -> Starlette:
    """An OpenAI-compatible chat server as some are: no usage chunk, a 500 for one request."""

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "stub/model-1", "object": "model"}]})

    async def chat(request: Request) -> StreamingResponse | JSONResponse:
        body = await request.json()
        if request.headers["x-request-id"] == "run-2":
            return JSONResponse({"error": {"message": "stub failure"}}, status_code=500)
        words = ["alpha", " beta", " gamma", " delta"][: body["max_completion_tokens"]]

        async def events():
            for word in words:
                chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )


def test_against_a_second_server_counting_tokens_itself(tiny_model, tmp_path):
    with running(_stub_chat()) as url:
        result, path = _bench(
            tmp_path, "--base-url", url, "--backend", "openai-chat", "--tokenizer", tiny_model,
            "--num-prompts", "5", "--random-input-len", "16", "--random-output-len", "4",
            "--request-rate", "50", "--burstiness", "2", "--request-id-prefix", "run-",
            "--label", "stub", "--goodput", "ttft:60000",
        )  # fmt: skip
    assert set(result) == {k for k in VLLM_KEYS - DETAILED if "e2el" not in k and "p50" not in k}
    assert path.name.startswith("stub-50.0qps-model-1-")
    assert (result["completed"], result["failed"]) == (4, 1)
    assert result["endpoint_type"] == result["backend"] == "openai-chat"
    assert result["model_id"] == "stub/model-1" and result["request_rate"] == 50.0
    # No usage: the text's tokens, counted with the tokenizer, as vLLM counts them.
    tokenizer = load_tokenizer(tiny_model)
    per_request = len(tokenizer("alpha beta gamma delta", add_special_tokens=False).input_ids)
    assert result["total_output_tokens"] == 4 * per_request
    assert result["request_goodput"] == pytest.approx(4 / result["duration"])


def test_a_refused_first_request_ends_the_run_with_its_error(tiny_model, server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SystemExit, match="first test request failed: HTTP 401"):
        main(["bench", "serve", "--base-url", server.url, "--model", "tiny",
              "--tokenizer", tiny_model, "--num-prompts", "1", "--disable-tqdm"])  # fmt: skip


async def _one_request_per_connection(stream) -> None:
    """An HTTP/1.1 server that answers a connection's first request, keeps it alive, and
    closes it on the second without a response (llama-server's after its fifth)."""
    answered = False
    async with stream:
        buffer = b""
        while True:
            try:
                buffer += await stream.receive()
            except anyio.EndOfStream:
                return
            if b"\r\n\r\n" not in buffer:
                continue
            head, _, rest = buffer.partition(b"\r\n\r\n")
            length = int(re.search(rb"content-length: (\d+)", head.lower())[1])
            if len(rest) < length:
                continue
            buffer = rest[length:]
            if answered:
                return  # closes without a response
            # The usage with the last choice, as llama-server sends it.
            chunk = {"choices": [{"index": 0, "text": "hi"}], "usage": {"completion_tokens": 7}}
            body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
            await stream.send(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            answered = True


@pytest.mark.anyio
async def test_a_kept_alive_connection_the_server_closed_is_sent_again_and_usage_is_read():
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    request = RequestInput("hello", 1, 4, "m")
    limits = httpx.Limits(max_connections=1)
    async with anyio.create_task_group() as tg, httpx.AsyncClient(limits=limits) as client:
        tg.start_soon(listener.serve, _one_request_per_connection)
        url = f"http://127.0.0.1:{port}/v1/completions"
        outputs = [await send(client, url, "openai", request) for _ in range(3)]
        tg.cancel_scope.cancel()
    answers = [(o.success, o.generated_text, o.error, o.output_tokens) for o in outputs]
    assert answers == [(True, "hi", "", 7)] * 3
