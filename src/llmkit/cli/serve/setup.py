"""serve's deployment flags checked and turned into settings, before the model loads: the
app's options (from their fields' own flags), uvicorn's settings, the logging setup."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging.config
import ssl
from pathlib import Path
from typing import Any, NoReturn

from llmkit.cli.options import from_flags
from llmkit.cli.serve.server_flags import ProcessOptions
from llmkit.transports.http.options import AccessOptions
from llmkit.transports.options import AppOptions


def app_options(args: argparse.Namespace, keys: list[str] | None) -> AppOptions:
    """The app's options the flags set, with the API ``keys`` (the flags', or the
    environment's)."""
    for flag, given in (
        ("--lora-modules", bool(args.lora_modules)),
        ("--enable-lora-runtime-updates", args.enable_lora_runtime_updates),
    ):
        if given and args.engine_socket:
            _fail(flag, "LoRA adapters need the engine in this process, not --engine-socket")
        if given and not getattr(args, "enable_lora", False):
            _fail(flag, "needs --enable-lora")
    return from_flags(AppOptions, args, access=from_flags(AccessOptions, args, api_key=keys))


def _fail(flag: str, message: str) -> NoReturn:
    raise SystemExit(f"llmkit: error: {flag}: {message}")


def _check_readable(flag: str, path: str) -> None:
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError as exc:
        _fail(flag, f"cannot read {path!r}: {exc.strerror or exc}")


def uvicorn_settings(process: ProcessOptions, max_message_bytes: int) -> dict[str, Any]:
    """uvicorn's ssl_* and ws_* settings (the largest WebSocket message, its ws_max_size); a
    missing, unreadable or mismatched TLS file names its flag."""
    named = dataclasses.asdict(process).items()
    settings = {name: value for name, value in named if name.startswith(("ssl_", "ws_"))}
    settings["ws_max_size"] = max_message_bytes
    keyfile, certfile, ca_certs = process.ssl_keyfile, process.ssl_certfile, process.ssl_ca_certs
    if bool(keyfile) != bool(certfile):
        _fail(
            "--ssl-keyfile" if certfile else "--ssl-certfile",
            "HTTPS needs both --ssl-keyfile and --ssl-certfile",
        )
    if not certfile:
        if ca_certs:
            _fail("--ssl-ca-certs", "needs --ssl-keyfile and --ssl-certfile (HTTPS)")
        if process.ssl_cert_reqs:
            _fail("--ssl-cert-reqs", "needs --ssl-keyfile and --ssl-certfile (HTTPS)")
        return settings
    for flag, path in (
        ("--ssl-keyfile", keyfile),
        ("--ssl-certfile", certfile),
        ("--ssl-ca-certs", ca_certs),
    ):
        if path:
            _check_readable(flag, path)
    if process.ssl_cert_reqs and not ca_certs:
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
    return settings


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
