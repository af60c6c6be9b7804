"""serve's deployment flags checked and turned into settings, before the model loads."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import json
import logging.config
import os
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from llmkit.chat.resolve import resolve_chat_template
from llmkit.errors import PluginError
from llmkit.lora_request import LoRARequest
from llmkit.plugins import REASONING_PARSERS, TOOL_PARSERS, load
from llmkit.serving.options import ServingOptions
from llmkit.transports.http.limits import RateLimits
from llmkit.transports.http.options import AccessOptions, HTTPOptions

if TYPE_CHECKING:
    from llmkit.transports.websocket.endpoint import WebSocketOptions


Options = TypeVar("Options")


def from_flags(cls: type[Options], args: argparse.Namespace, **given: Any) -> Options:
    """An option object with each field its flag of the same name sets, and ``given``: a new
    setting is a field of the object and a flag, nothing more."""
    fields = {f.name for f in dataclasses.fields(cls)} - set(given)  # type: ignore[arg-type]
    return cls(**{name: getattr(args, name) for name in fields if hasattr(args, name)}, **given)


def http_options(args: argparse.Namespace) -> HTTPOptions:
    """How the app treats requests; 0 turns a limit off."""
    for name in ("sse_keepalive_s", "max_request_body_bytes", "request_body_timeout_s"):
        if getattr(args, name) < 0:
            _fail("--" + name.replace("_", "-"), "must be >= 0")
    return from_flags(HTTPOptions, args, access_log=not args.disable_uvicorn_access_log)


def access_options(args: argparse.Namespace, keys: list[str] | None) -> AccessOptions:
    """API keys (``keys``: the flags', or the environment's) and CORS."""
    return from_flags(
        AccessOptions,
        args,
        api_key=keys,
        allowed_origins=_split(args.allowed_origins),
        allowed_methods=_split(args.allowed_methods) or ["*"],
        allowed_headers=_split(args.allowed_headers) or ["*"],
    )


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _fail(flag: str, message: str) -> NoReturn:
    raise SystemExit(f"llmkit: error: {flag}: {message}")


def _check_readable(flag: str, path: str) -> None:
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError as exc:
        _fail(flag, f"cannot read {path!r}: {exc.strerror or exc}")


def tls_settings(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's ssl_* settings; a missing, unreadable or mismatched file names its flag."""
    keyfile, certfile, ca_certs = args.ssl_keyfile, args.ssl_certfile, args.ssl_ca_certs
    if bool(keyfile) != bool(certfile):
        _fail(
            "--ssl-keyfile" if certfile else "--ssl-certfile",
            "HTTPS needs both --ssl-keyfile and --ssl-certfile",
        )
    if not certfile:
        if ca_certs:
            _fail("--ssl-ca-certs", "needs --ssl-keyfile and --ssl-certfile (HTTPS)")
        if args.ssl_cert_reqs:
            _fail("--ssl-cert-reqs", "needs --ssl-keyfile and --ssl-certfile (HTTPS)")
        return {}
    for flag, path in (
        ("--ssl-keyfile", keyfile),
        ("--ssl-certfile", certfile),
        ("--ssl-ca-certs", ca_certs),
    ):
        if path:
            _check_readable(flag, path)
    if args.ssl_cert_reqs and not ca_certs:
        _fail("--ssl-cert-reqs", "checking client certificates needs --ssl-ca-certs")
    # What uvicorn will do once the model has loaded, done now so a bad file fails fast.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as exc:
        _fail(
            "--ssl-certfile",
            f"{certfile!r} and --ssl-keyfile {keyfile!r} are not a "
            f"matching PEM certificate and key: {exc}",
        )
    if ca_certs:
        try:
            context.load_verify_locations(ca_certs)
        except ssl.SSLError as exc:
            _fail("--ssl-ca-certs", f"{ca_certs!r} holds no PEM certificates: {exc}")
    return {
        "ssl_keyfile": keyfile,
        "ssl_certfile": certfile,
        "ssl_ca_certs": ca_certs,
        "ssl_cert_reqs": args.ssl_cert_reqs,
    }


def load_middleware(paths: list[str]) -> list[Any]:
    """Each ``module:attr`` (or vLLM's ``module.attr``) imported, in the order given."""
    loaded = []
    for path in paths:
        module_name, sep, attr = path.partition(":")
        if not sep:
            module_name, _, attr = path.rpartition(".")
        if not module_name or not attr:
            _fail("--middleware", f"{path!r} is not an import path like package.module:Class")
        try:
            module = importlib.import_module(module_name)
            target: Any = functools.reduce(getattr, attr.split("."), module)
        except Exception as exc:  # noqa: BLE001 - any import failure stops the start
            _fail("--middleware", f"cannot import {path!r}: {type(exc).__name__}: {exc}")
        if not callable(target):
            _fail("--middleware", f"{path!r} is not a middleware class, factory or function")
        loaded.append(target)
    return loaded


def apply_log_config(path: str) -> None:
    """Configures logging from a JSON dictConfig file, so the model's loading logs there too."""
    try:
        config = json.loads(Path(path).read_text())
    except OSError as exc:
        _fail("--log-config-file", f"cannot read {path!r}: {exc.strerror or exc}")
    except json.JSONDecodeError as exc:
        _fail("--log-config-file", f"{path!r} is not JSON: {exc}")
    if not isinstance(config, dict):
        _fail("--log-config-file", f"{path!r} must hold a JSON object (a dictConfig)")
    try:
        logging.config.dictConfig(config)
    except (ValueError, TypeError, AttributeError, ImportError) as exc:
        _fail("--log-config-file", f"{path!r} is not a valid logging dictConfig: {exc}")


def serving_options(args: argparse.Namespace) -> ServingOptions:
    if not args.response_role.strip():
        _fail("--response-role", "must not be empty")
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        _fail("--enable-auto-tool-choice", "needs --tool-call-parser NAME")
    # Loaded now, so that a missing or broken plugin costs no model loading time.
    for flag, group, name in (
        ("--tool-call-parser", TOOL_PARSERS, args.tool_call_parser),
        ("--reasoning-parser", REASONING_PARSERS, args.reasoning_parser),
    ):
        if name:
            try:
                load(group, name)
            except PluginError as exc:
                _fail(flag, str(exc))
    if not args.structured_outputs_compile_timeout_s > 0:
        _fail("--structured-outputs-compile-timeout-s", "must be more than 0")
    media_path = args.allowed_local_media_path
    if media_path is not None and not os.path.isdir(media_path):
        _fail("--allowed-local-media-path", f"{media_path!r} is not a directory")
    return ServingOptions(
        allowed_media_domains=tuple(args.allowed_media_domains),
        allowed_local_media_path=media_path,
        chat_template_content_format=args.chat_template_content_format,
        response_role=args.response_role,
        return_tokens_as_token_ids=args.return_tokens_as_token_ids,
        force_include_usage=args.enable_force_include_usage,
        prompt_tokens_details=args.enable_prompt_tokens_details,
        tool_call_parser=args.tool_call_parser,
        enable_auto_tool_choice=args.enable_auto_tool_choice,
        reasoning_parser=args.reasoning_parser,
        reasoning_field=args.reasoning_field,
        structured_outputs_compile_timeout_s=args.structured_outputs_compile_timeout_s,
    )


def websocket_settings(args: argparse.Namespace) -> tuple[WebSocketOptions, dict[str, Any]]:
    """The /v1/ws endpoint's limits, and uvicorn's ws_* settings that go with them."""
    from llmkit.transports.websocket.endpoint import WebSocketOptions

    for flag in ("ws_max_connections", "ws_max_requests", "ws_max_message_bytes"):
        if getattr(args, flag) < 1:
            _fail("--" + flag.replace("_", "-"), "must be at least 1")
    for flag in ("ws_idle_timeout", "ws_ping_interval", "ws_ping_timeout"):
        if getattr(args, flag) <= 0:
            _fail("--" + flag.replace("_", "-"), "must be more than 0")
    options = WebSocketOptions(
        max_connections=args.ws_max_connections,
        max_requests_per_connection=args.ws_max_requests,
        max_message_bytes=args.ws_max_message_bytes,
        idle_timeout_s=args.ws_idle_timeout,
    )
    uvicorn_settings = {
        "ws_max_size": args.ws_max_message_bytes,
        "ws_ping_interval": args.ws_ping_interval,
        "ws_ping_timeout": args.ws_ping_timeout,
        "ws_per_message_deflate": args.ws_compression,
    }
    return options, uvicorn_settings


def chat_template(value: str | None) -> str | None:
    """``--chat-template``: a plugin's name, a file or the template itself."""
    if value is None:
        return None
    try:
        return resolve_chat_template(value, "--chat-template", files=True)
    except ValueError as exc:
        raise SystemExit(f"llmkit: error: {exc}") from None


def rate_limits(args: argparse.Namespace) -> RateLimits | None:
    """The per-key limits the flags ask for; a bad value names its flag."""
    if args.rate_limit_burst is not None and args.rate_limit_rps is None:
        _fail("--rate-limit-burst", "needs --rate-limit-rps")
    for flag, value in (
        ("--rate-limit-concurrency", args.rate_limit_concurrency),
        ("--rate-limit-rps", args.rate_limit_rps),
        ("--rate-limit-burst", args.rate_limit_burst),
    ):
        if value is not None and not value > 0:
            _fail(flag, f"must be > 0, got {value}")
    limits = RateLimits(args.rate_limit_concurrency, args.rate_limit_rps, args.rate_limit_burst)
    return limits if limits.enabled else None


def lora_modules(args: argparse.Namespace) -> list[LoRARequest]:
    """``--lora-modules`` as LoRARequests (ids 1, 2, ...); the LoRA flags need --enable-lora."""
    for flag, given in (
        ("--lora-modules", bool(args.lora_modules)),
        ("--enable-lora-runtime-updates", args.enable_lora_runtime_updates),
    ):
        if given and args.engine_socket:
            _fail(flag, "LoRA adapters need the engine in this process, not --engine-socket")
        if given and not getattr(args, "enable_lora", False):
            _fail(flag, "needs --enable-lora")
    loras: dict[str, LoRARequest] = {}
    for value in args.lora_modules:
        if value.lstrip().startswith("{"):
            try:
                spec = json.loads(value)
            except json.JSONDecodeError as exc:
                _fail("--lora-modules", f"{value!r} is not JSON: {exc}")
            name, path = (
                spec.get(key) if isinstance(spec, dict) else None for key in ("name", "path")
            )
        else:
            name, _, path = value.partition("=")
        if not isinstance(name, str) or not isinstance(path, str) or not name or not path:
            _fail("--lora-modules", f'{value!r} is not NAME=PATH or {{"name": ..., "path": ...}}')
        if name in loras:
            _fail("--lora-modules", f"the name {name!r} is given twice")
        loras[name] = LoRARequest(name, len(loras) + 1, path)
    return list(loras.values())
