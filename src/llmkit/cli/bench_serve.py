"""``llmkit bench serve``: vLLM's ``bench serve`` flags (those that apply to an
OpenAI-compatible server), read into ``BenchServeOptions``."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from llmkit.bench.serve.options import BACKENDS, GOODPUT_METRICS, METRICS, BenchServeOptions

D = BenchServeOptions()  # the defaults, vLLM's

_SAMPLING = (
    *("top_p", "top_k", "min_p", "temperature"),
    *("frequency_penalty", "presence_penalty", "repetition_penalty"),
)


def add_parser(benches: argparse._SubParsersAction) -> None:
    p = benches.add_parser(
        "serve",
        help="vLLM's `bench serve` against any OpenAI-compatible server, in its result format",
        description="Sends a dataset's prompts to a running OpenAI-compatible server (llmkit, "
        "vLLM, llama-server, Ollama) on a Poisson or gamma arrival process, streams every "
        "answer, and reports vLLM's metrics (TTFT, TPOT, ITL, end-to-end latency, throughput) "
        "in its result JSON. The API key comes from OPENAI_API_KEY, as for vLLM.",
    )
    server = p.add_argument_group("server")
    server.add_argument(
        "--backend",
        choices=list(BACKENDS),
        default=D.backend,
        help="the API "
        "to call: openai and vllm send completions, openai-chat chat completions "
        "(default: openai)",
    )
    server.add_argument("--base-url", help="the server's URL (default: http://HOST:PORT)")
    server.add_argument("--host", default=D.host, help=f"(default: {D.host})")
    server.add_argument("--port", type=int, default=D.port, help=f"(default: {D.port})")
    server.add_argument(
        "--endpoint",
        help="the API path (default: the backend's, /v1/completions or /v1/chat/completions)",
    )
    server.add_argument(
        "--header",
        nargs="*",
        metavar="KEY=VALUE",
        default=[],
        help="headers sent with every request",
    )
    server.add_argument(
        "--model", help="the model to ask for (default: the first the server lists)"
    )
    server.add_argument("--served-model-name", help="the name sent in requests, if not --model")
    server.add_argument(
        "--tokenizer",
        help="a tokenizer or model folder, a GGUF file or "
        "'smollm2', to make and count prompts (default: --model)",
    )
    data = p.add_argument_group("dataset")
    data.add_argument(
        "--dataset-name",
        choices=["random", "custom"],
        default=D.dataset_name,
        help='random token prompts, or custom: a JSONL file of {"prompt": ...} '
        "lines (default: random)",
    )
    data.add_argument("--dataset-path", help="the JSONL file of --dataset-name custom")
    data.add_argument(
        "--num-prompts", type=int, default=D.num_prompts, help=f"(default: {D.num_prompts})"
    )
    data.add_argument("--input-len", type=int, help="sets --random-input-len")
    data.add_argument(
        "--output-len", type=int, help="sets --random-output-len and --custom-output-len"
    )
    data.add_argument(
        "--random-input-len",
        type=int,
        default=D.random_input_len,
        help=f"(default: {D.random_input_len})",
    )
    data.add_argument(
        "--random-output-len",
        type=int,
        default=D.random_output_len,
        help=f"(default: {D.random_output_len})",
    )
    data.add_argument(
        "--random-range-ratio",
        type=float,
        default=D.random_range_ratio,
        help="lengths drawn from [len * (1 - r), len * (1 + r)] (default: 0)",
    )
    data.add_argument(
        "--random-prefix-len",
        type=int,
        default=D.random_prefix_len,
        help="tokens of one random prefix before every prompt (default: 0)",
    )
    data.add_argument(
        "--custom-output-len",
        type=int,
        default=D.custom_output_len,
        help=f"(default: {D.custom_output_len})",
    )
    data.add_argument("--seed", type=int, default=D.seed, help=f"(default: {D.seed})")
    data.add_argument(
        "--ignore-eos",
        action="store_true",
        help="ask for every output token (always on for the random dataset)",
    )
    data.add_argument(
        "--request-id-prefix", default=D.request_id_prefix, help=f"(default: {D.request_id_prefix})"
    )
    data.add_argument(
        "--extra-body",
        type=json.loads,
        default={},
        help="a JSON object merged into every request's body",
    )
    for name in _SAMPLING:
        kind = int if name == "top_k" else float
        data.add_argument(
            f"--{name.replace('_', '-')}",
            type=kind,
            help=f"sent as {name} (temperature's default: 0, greedy)",
        )
    traffic = p.add_argument_group("traffic")
    traffic.add_argument(
        "--request-rate",
        type=float,
        default=D.request_rate,
        help="requests per second; inf sends all at once (default: inf)",
    )
    traffic.add_argument(
        "--burstiness",
        type=float,
        default=D.burstiness,
        help="the gamma shape of the gaps between requests: 1 Poisson, <1 burstier (default: 1)",
    )
    traffic.add_argument("--max-concurrency", type=int, help="the most requests in flight")
    traffic.add_argument("--num-warmups", type=int, default=0, help="unmeasured requests first")
    traffic.add_argument(
        "--ready-check-timeout-sec",
        type=int,
        default=D.ready_check_timeout_sec,
        help="how long to retry the first request; 0 skips it (default: 600)",
    )
    traffic.add_argument("--disable-tqdm", action="store_true", help="no progress bar")
    out = p.add_argument_group("results")
    out.add_argument(
        "--percentile-metrics",
        default=",".join(D.percentile_metrics),
        help=f"metrics to report percentiles of, of {','.join(METRICS)} (default: ttft,tpot,itl)",
    )
    out.add_argument(
        "--metric-percentiles",
        default=",".join(f"{p:g}" for p in D.metric_percentiles),
        help="comma-separated (default: 99)",
    )
    out.add_argument(
        "--goodput",
        nargs="+",
        metavar="KEY:MS",
        default=[],
        help=f"SLOs a good request meets, of {', '.join(GOODPUT_METRICS)}, in ms",
    )
    out.add_argument(
        "--label", help="the result's label and file name prefix (default: the backend)"
    )
    out.add_argument(
        "--metadata",
        nargs="*",
        metavar="KEY=VALUE",
        default=[],
        help="keys added to the result JSON",
    )
    out.add_argument("--save-result", action="store_true", help="write the result JSON")
    out.add_argument(
        "--save-detailed",
        action="store_true",
        help="keep every request's lengths, TTFT, ITLs, text and error in it",
    )
    out.add_argument("--append-result", action="store_true", help="append to the file")
    out.add_argument("--result-dir", help="its folder (default: the current one)")
    out.add_argument(
        "--result-filename",
        help="its name (default: vLLM's, LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json)",
    )
    out.add_argument(
        "--plot",
        action="store_true",
        help="draw the latency distributions to an SVG beside the JSON",
    )
    p.set_defaults(handler=serve_command)


def _pairs(items: list[str], sep: str, flag: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found:
            raise SystemExit(f"llmkit: error: {flag} takes KEY{sep}VALUE, not {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def options(args: argparse.Namespace) -> Any:
    from llmkit.bench.serve import BenchServeOptions

    goodput = {k: float(v) for k, v in _pairs(args.goodput, ":", "--goodput").items()}
    wrong = [k for k in goodput if k not in GOODPUT_METRICS]
    metrics = tuple(args.percentile_metrics.split(","))
    if wrong or not set(metrics) <= set(METRICS):
        raise SystemExit(f"llmkit: error: unknown metric in {wrong or list(metrics)}")
    sampling = {n: getattr(args, n) for n in _SAMPLING if getattr(args, n) is not None}
    return BenchServeOptions(
        **{k: v for k, v in vars(args).items() if k in _PLAIN},
        headers=_pairs(args.header, "=", "--header"),
        api_key=os.environ.get("OPENAI_API_KEY"),
        random_input_len=args.input_len or args.random_input_len,
        random_output_len=args.output_len or args.random_output_len,
        custom_output_len=args.output_len or args.custom_output_len,
        sampling={"temperature": 0.0, **sampling},
        percentile_metrics=metrics,
        metric_percentiles=tuple(float(p) for p in args.metric_percentiles.split(",")),
        goodput=goodput,
        metadata=_pairs(args.metadata, "=", "--metadata"),
    )


# The flags that are the option's field as they are.
_PLAIN = {
    "backend",
    "base_url",
    "host",
    "port",
    "endpoint",
    "model",
    "served_model_name",
    "tokenizer",
    "dataset_name",
    "dataset_path",
    "num_prompts",
    "random_range_ratio",
    "random_prefix_len",
    "seed",
    "ignore_eos",
    "extra_body",
    "request_id_prefix",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "num_warmups",
    "ready_check_timeout_sec",
    "disable_tqdm",
    "label",
    "save_result",
    "save_detailed",
    "append_result",
    "result_dir",
    "result_filename",
    "plot",
}


def serve_command(args: argparse.Namespace) -> int:
    from llmkit.bench.serve import run

    try:
        run(options(args))
    except ValueError as exc:
        raise SystemExit(f"llmkit: error: {exc}") from None
    return 0
