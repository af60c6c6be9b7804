"""``llmkit serve``'s deployment flags, under vLLM's names: TLS, middleware, logging, answers."""

from __future__ import annotations

import argparse

from llmkit.serving.options import CONTENT_FORMATS
from llmkit.transports.http.body import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES

UVICORN_LOG_LEVELS = ["critical", "error", "warning", "info", "debug", "trace"]


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """The flags a `vllm serve` deployment passes, with the same names and meanings."""
    tls = parser.add_argument_group("TLS")
    tls.add_argument("--ssl-keyfile", metavar="PATH", help="the PEM private key; serves HTTPS")
    tls.add_argument(
        "--ssl-certfile", metavar="PATH", help="the PEM certificate (chain) for --ssl-keyfile"
    )
    tls.add_argument(
        "--ssl-ca-certs",
        metavar="PATH",
        help="PEM CA certificates that client certificates are checked against",
    )
    tls.add_argument(
        "--ssl-cert-reqs",
        type=int,
        choices=[0, 1, 2],
        default=0,
        help="client certificates: 0 not asked for, 1 optional, 2 required (Python's "
        "ssl.CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED; default: 0)",
    )
    server = parser.add_argument_group("server")
    server.add_argument(
        "--middleware",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="an ASGI middleware class or factory, or an async dispatch(request, call_next) "
        "function, by import path (repeatable; wrapped in the order given, the last outermost)",
    )
    server.add_argument(
        "--enable-server-load-tracking",
        action="store_true",
        help='count requests in flight for GET /load ({"server_load": N}); else /load says 0',
    )
    ws = parser.add_argument_group("WebSocket (/v1/ws)")
    ws.add_argument(
        "--ws-max-connections",
        type=int,
        default=256,
        help="WebSocket connections at once; one more is closed with code 1013 (default: 256)",
    )
    ws.add_argument(
        "--ws-max-requests",
        type=int,
        default=128,
        help="requests in flight on one WebSocket connection; one more gets an error "
        "message (default: 128)",
    )
    ws.add_argument(
        "--ws-max-message-bytes",
        type=int,
        default=4 * 1024 * 1024,
        help="the largest WebSocket message taken; a larger one closes the connection with "
        "code 1009 (default: 4 MiB)",
    )
    ws.add_argument(
        "--ws-idle-timeout",
        type=float,
        default=300.0,
        help="seconds a WebSocket connection with nothing in flight may stay silent before "
        "it is closed (default: 300)",
    )
    ws.add_argument(
        "--ws-compression",
        action="store_true",
        help="offer permessage-deflate: less bandwidth for slow links, more server CPU per "
        "message (default: off; token chunks are small and the CPU is the engine's)",
    )
    ws.add_argument(
        "--ws-ping-interval",
        type=float,
        default=20.0,
        help="seconds between the server's WebSocket pings (default: 20)",
    )
    ws.add_argument(
        "--ws-ping-timeout",
        type=float,
        default=20.0,
        help="seconds to wait for a pong before dropping the connection and aborting its "
        "requests (default: 20)",
    )
    limits = parser.add_argument_group("per-key limits (429 over a limit)")
    limits.add_argument(
        "--rate-limit-concurrency",
        type=int,
        metavar="N",
        help="the most requests one API key may have in flight at once (default: no limit)",
    )
    limits.add_argument(
        "--rate-limit-rps",
        type=float,
        metavar="RATE",
        help="the requests per second one API key may make, as a token bucket (default: no limit)",
    )
    limits.add_argument(
        "--rate-limit-burst",
        type=int,
        metavar="N",
        help="the requests a key may make at once before --rate-limit-rps applies "
        "(default: one second's worth)",
    )
    server.add_argument(
        "--sse-keepalive-s",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="send a comment line on a stream idle this long (queued or in a long prefill), "
        "so proxies keep it open; 0 never does (default: 15)",
    )
    server.add_argument(
        "--max-request-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="BYTES",
        help="answer 413 to a larger request body, images included; 0: no limit "
        f"(default: {DEFAULT_MAX_BODY_BYTES}, 16 MiB)",
    )
    server.add_argument(
        "--request-body-timeout-s",
        type=float,
        default=DEFAULT_BODY_TIMEOUT_S,
        metavar="SECONDS",
        help="answer 408 to a request whose body has not arrived this long after it began; "
        f"0: no limit (default: {DEFAULT_BODY_TIMEOUT_S:g})",
    )
    replicas = parser.add_argument_group("replicas on Ray (pip install 'llmkit[ray]')")
    replicas.add_argument(
        "--data-parallel-size",
        type=int,
        default=1,
        metavar="N",
        help="serve N engine replicas, each a Ray actor, routed by load and shared prompt "
        "prefix (default: 1, this process's engine)",
    )
    replicas.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster the replicas run on (its GCS address, or 'auto'); default: a "
        "local cluster started for the server",
    )
    lora = parser.add_argument_group("LoRA adapters (with --enable-lora)")
    lora.add_argument(
        "--lora-modules",
        nargs="+",
        default=[],
        metavar="NAME=PATH",
        help="LoRA adapters (PEFT folders) that clients pick by name in `model`: NAME=PATH, or "
        'vLLM\'s JSON {"name": ..., "path": ...}; each is checked before serving',
    )
    lora.add_argument(
        "--enable-lora-runtime-updates",
        action="store_true",
        help="add POST /v1/load_lora_adapter and /v1/unload_lora_adapter "
        '({"lora_name", "lora_path"}), which vLLM turns on with VLLM_ALLOW_RUNTIME_LORA_UPDATING',
    )
    logs = parser.add_argument_group("logging")
    logs.add_argument(
        "--log-config-file",
        metavar="PATH",
        help="a JSON logging.config.dictConfig for the server's logs, applied before the "
        "model loads",
    )
    logs.add_argument(
        "--uvicorn-log-level",
        choices=UVICORN_LOG_LEVELS,
        help="uvicorn's own log level (default: --log-level, or the --log-config-file's)",
    )
    logs.add_argument(
        "--disable-uvicorn-access-log",
        action="store_true",
        help="drop the access log line of each request (prompts are never in it)",
    )
    plugins = parser.add_argument_group("tools and reasoning (plugins: `llmkit plugins`)")
    plugins.add_argument(
        "--enable-auto-tool-choice",
        action="store_true",
        help='let the model decide to call tools (tool_choice "auto", the default when a '
        "request has tools); needs --tool-call-parser",
    )
    plugins.add_argument(
        "--tool-call-parser",
        metavar="NAME",
        help="the llmkit.tool_parsers plugin that reads tool calls in the output (built in: "
        "hermes, llama3_json, mistral, pythonic, qwen3_coder, openai, deepseek_v31, glm45, "
        "kimi_k2)",
    )
    plugins.add_argument(
        "--reasoning-parser",
        metavar="NAME",
        help="the llmkit.reasoning_parsers plugin that moves reasoning out of the content "
        "(built in: deepseek_r1, qwen3, openai)",
    )
    plugins.add_argument(
        "--reasoning-field",
        choices=("both", "reasoning", "reasoning_content"),
        default="both",
        help="the chat answer's field(s) for the reasoning: reasoning (vLLM's current name), "
        "reasoning_content (DeepSeek's and older vLLM's), or both (default)",
    )
    plugins.add_argument(
        "--structured-outputs-compile-timeout-s",
        type=float,
        default=5.0,
        metavar="S",
        help="how long a request's JSON schema, regex or grammar may take to compile (off "
        "the event loop) before the request is a 400 (default: 5)",
    )
    media = parser.add_argument_group("image inputs (closed by default: data: URLs only)")
    media.add_argument(
        "--allowed-media-domains",
        nargs="+",
        default=[],
        metavar="HOST",
        help="hosts whose http(s) image URLs the server fetches (exact names; default: none)",
    )
    media.add_argument(
        "--allowed-local-media-path",
        metavar="DIR",
        help="a directory that file: image URLs may read from (default: none)",
    )
    answers = parser.add_argument_group("answers")
    answers.add_argument(
        "--chat-template-content-format",
        choices=CONTENT_FORMATS,
        default="auto",
        help="how list-of-parts message content reaches the chat template: 'string' joins "
        "the text parts, 'openai' passes [{'type': 'text', 'text': ...}], 'auto' picks "
        "'openai' if the template loops over a message's content (default: auto)",
    )
    answers.add_argument(
        "--response-role",
        default="assistant",
        help="the role of the generated chat message and the first stream delta "
        "(default: assistant)",
    )
    answers.add_argument(
        "--return-tokens-as-token-ids",
        action="store_true",
        help="name logprob tokens 'token_id:N' instead of their text",
    )
    answers.add_argument(
        "--enable-force-include-usage",
        action="store_true",
        help="end every stream with a usage chunk, even when stream_options did not ask",
    )
    answers.add_argument(
        "--enable-prompt-tokens-details",
        action="store_true",
        help="add usage.prompt_tokens_details.cached_tokens (prompt tokens found in the "
        "prefix cache)",
    )
