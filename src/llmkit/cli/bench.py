"""``llmkit bench throughput | serve | http | perplexity | roofline``: the flags of the
benchmarks in ``llmkit.bench`` (``serve``'s, vLLM's own, in ``cli/bench_serve.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from llmkit.bench.workload import Workload
from llmkit.cli import bench_serve
from llmkit.cli.flags import add_engine_flags, engine_config, engine_kwargs, to_flags

_EXTRA_MODULES = ("httpx", "openai")


def add_parser(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench", help="benchmarks (http needs: pip install 'llmkit[bench]')"
    )
    benches = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")

    throughput = benches.add_parser("throughput", help="offline generation throughput (LLM)")
    throughput.add_argument(
        "--model",
        default="demo",
        help="a model directory, a GGUF file, 'smollm2' or 'demo' (default)",
    )
    throughput.add_argument(
        "--num-prompts", type=int, default=64, help="requests, all sent at once (default: 64)"
    )
    _add_workload_flags(throughput)
    add_engine_flags(throughput)
    throughput.set_defaults(handler=throughput_command)

    bench_serve.add_parser(benches)

    http = benches.add_parser("http", help="streaming clients over HTTP vs the engine directly")
    http.add_argument(
        "--model",
        default="demo",
        help="a model directory, a GGUF file, 'smollm2' or 'demo' (default)",
    )
    http.add_argument("--url", help="a running server (default: start `llmkit serve` for the run)")
    http.add_argument("--api-key", help="the server's API key, if it asks for one")
    http.add_argument(
        "--served-model-name",
        help="the model name to ask for (default: the first the server lists)",
    )
    http.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1, 16, 64],
        help="the numbers of concurrent clients, one level each (default: 1 16 64)",
    )
    http.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="requests per client at each level, one after the other (default: 2)",
    )
    http.add_argument("--skip-direct", action="store_true", help="no direct-engine baseline")
    http.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per level and side, alternating; each side keeps its best (for shared machines)",
    )
    _add_workload_flags(http)
    add_engine_flags(http)
    http.set_defaults(handler=http_command)

    ppl = benches.add_parser(
        "perplexity",
        help="a model's perplexity on a text file, over prompt_logprobs",
        description="Perplexity: exp of the mean negative logprob of the file's tokens. A text "
        "longer than the context is scored in windows of max_model_len - 1 tokens, each "
        "starting on the last token of the one before (context only there), so every token "
        "but the first is scored once.",
    )
    ppl.add_argument("file", metavar="FILE", help="a UTF-8 text file")
    ppl.add_argument(
        "--model",
        default="smollm2",
        help="a model directory, a GGUF file, 'smollm2' (default) or 'demo'",
    )
    add_engine_flags(ppl)
    ppl.set_defaults(handler=perplexity_command)

    roof = benches.add_parser(
        "roofline",
        help="decode tok/s beside the floor this machine's memory bandwidth sets",
        description="Decode is memory-bound: each step reads every weight once and each "
        "stream's KV. Measures the memory bandwidth, decodes --output-len tokens in each "
        "number of --streams at once, and prints the measured rate beside the floor.",
    )
    roof.add_argument(
        "--model",
        default="smollm2",
        help="a model directory, a GGUF file, 'smollm2' (default) or 'demo'",
    )
    roof.add_argument("--streams", type=int, nargs="+", default=[1, 16], help="(default: 1 16)")
    roof.add_argument(
        "--output-len", type=int, default=128, help="tokens per stream (default: 128)"
    )
    add_engine_flags(roof)
    roof.set_defaults(handler=roofline_command)


def _add_workload_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("workload")
    group.add_argument("--input-words", type=int, default=24, help="words per prompt (default: 24)")
    group.add_argument(
        "--output-len",
        type=int,
        default=128,
        help="tokens per completion, generated greedily past EOS (default: 128)",
    )
    group.add_argument(
        "--workload-seed", type=int, default=0, help="seed of the random prompts (default: 0)"
    )


def _workload(args: argparse.Namespace) -> Workload:
    return Workload(args.input_words, args.output_len, args.workload_seed)


def throughput_command(args: argparse.Namespace) -> int:
    from llmkit.bench.throughput import measure_throughput

    engine_config(args.model, args)  # a bad flag ends here, with its message
    result = measure_throughput(args.model, args.num_prompts, _workload(args), engine_kwargs(args))
    print(result.report())
    return 0


def perplexity_command(args: argparse.Namespace) -> int:
    from llmkit.bench.perplexity import measure_perplexity

    engine_config(args.model, args)  # a bad flag ends here, with its message
    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"llmkit: error: cannot read {args.file!r}: {exc}") from None
    try:
        result = measure_perplexity(args.model, text, engine_kwargs(args))
    except ValueError as exc:  # a text too short to score
        raise SystemExit(f"llmkit: error: {args.file}: {exc}") from None
    print(result.report())
    return 0


def roofline_command(args: argparse.Namespace) -> int:
    from llmkit.bench.roofline import measure_roofline

    engine_config(args.model, args)  # a bad flag ends here, with its message
    streams = tuple(args.streams)
    result = measure_roofline(args.model, engine_kwargs(args), streams, output=args.output_len)
    print(result.report())
    return 0


def http_command(args: argparse.Namespace) -> int:
    try:
        from llmkit.bench.http_overhead import ServingOptions, run_serving
    except ModuleNotFoundError as exc:
        if exc.name not in _EXTRA_MODULES:
            raise
        raise SystemExit(
            f"llmkit bench http needs {exc.name}, which is not installed: "
            "pip install 'llmkit[bench]'"
        ) from None
    options = ServingOptions(
        concurrency=tuple(args.concurrency),
        rounds=args.rounds,
        repeat=args.repeat,
        direct=not args.skip_direct,
        workload=_workload(args),
    )
    result = run_serving(
        engine_config(args.model, args),
        options,
        url=args.url,
        api_key=args.api_key,
        served_model_name=args.served_model_name,
        server_flags=to_flags(engine_kwargs(args)),
    )
    print(result.report())
    return 0
