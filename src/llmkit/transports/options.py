"""AppOptions: everything ``create_app`` takes beside the engine, each setting with the
``llmkit serve`` flag that sets it."""

from __future__ import annotations

import functools
import importlib
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.middleware import Middleware

from llmkit.chat.resolve import resolve_chat_template
from llmkit.config.option import option
from llmkit.lora_request import LoRARequest
from llmkit.serving.lora import parse_lora_modules
from llmkit.serving.options import ServingOptions
from llmkit.transports.http.limits import RateLimits
from llmkit.transports.http.options import AccessOptions, HTTPOptions
from llmkit.transports.websocket.options import WebSocketOptions


def import_middleware(paths: Sequence[str]) -> list[Callable[..., Any]]:
    """Each ``module:attr`` (or vLLM's ``module.attr``) imported, in the order given; one
    that cannot be imported, or is not callable, is a ValueError."""
    loaded = []
    for path in paths:
        module_name, sep, attr = path.partition(":")
        if not sep:
            module_name, _, attr = path.rpartition(".")
        if not module_name or not attr:
            raise ValueError(f"{path!r} is not an import path like package.module:Class")
        try:
            module = importlib.import_module(module_name)
            target: Any = functools.reduce(getattr, attr.split("."), module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the value's fault
            raise ValueError(f"cannot import {path!r}: {type(exc).__name__}: {exc}") from None
        if not callable(target):
            raise ValueError(f"{path!r} is not a middleware class, factory or function")
        loaded.append(target)
    return loaded


@dataclass(frozen=True)
class AppOptions:
    """How the app serves its engine.

    Parameters:

    * ``chat_template``: the template text for models without one, or to replace theirs
      (``llmkit serve --chat-template`` also takes a plugin's name or a file).
    * ``ui``: serve the chat page at ``/`` (it talks to ``/v1/models`` and ``/v1/ws``).
    * ``serving``: how the answers are shaped (:class:`ServingOptions`).
    * ``access``: API keys and CORS (:class:`AccessOptions`).
    * ``http``: body limits, stream keep-alives, load tracking, request logs
      (:class:`HTTPOptions`).
    * ``websocket``: the limits of the ``/v1/ws`` endpoint (:class:`WebSocketOptions`).
    * ``rate_limits``: limits per API key, 429 over one (:class:`RateLimits`; none by
      default).
    * ``middleware``: Starlette ``Middleware`` objects, ASGI middleware classes or
      factories (called with the app), or ``async def dispatch(request, call_next)``
      functions, wrapped around everything in the order given, as ``app.add_middleware``
      calls would (the last one is outermost).
    * ``lora_modules``: LoRA adapters clients name in ``model`` (the engine needs
      ``enable_lora``; ``llmkit serve`` checks each with ``engine.add_lora`` before serving);
      ``enable_lora_runtime_updates`` adds ``POST /v1/load_lora_adapter`` and
      ``/v1/unload_lora_adapter`` (``{"lora_name", "lora_path"}``), as vLLM has them.
    """

    chat_template: str | None = option(
        None,
        parse=functools.partial(resolve_chat_template, files=True),
        help="an installed chat template's name (llmkit.chat_templates plugins, e.g. chatml), "
        "a template file, or the template itself",
    )
    ui: bool = option(
        False,
        name="--no-ui",
        parse=operator.not_,
        help="do not serve the chat page at / (the API routes stay)",
    )
    serving: ServingOptions = field(default_factory=ServingOptions)
    access: AccessOptions = field(default_factory=AccessOptions)
    http: HTTPOptions = field(default_factory=HTTPOptions)
    websocket: WebSocketOptions = field(default_factory=WebSocketOptions)
    rate_limits: RateLimits = field(default_factory=RateLimits)
    middleware: Sequence[Middleware | Callable[..., Any]] = option(
        (),
        group="server",
        action="append",
        metavar="MODULE:ATTR",
        parse=import_middleware,
        help="an ASGI middleware class or factory, or an async dispatch(request, call_next) "
        "function, by import path (repeatable; wrapped in the order given, the last outermost)",
    )
    lora_modules: Sequence[LoRARequest] = option(
        (),
        group="lora",
        nargs="+",
        metavar="NAME=PATH",
        parse=parse_lora_modules,
        help="LoRA adapters (PEFT folders) that clients pick by name in `model`: NAME=PATH, or "
        'vLLM\'s JSON {"name": ..., "path": ...}; each is checked before serving',
    )
    enable_lora_runtime_updates: bool = option(
        False,
        group="lora",
        help="add POST /v1/load_lora_adapter and /v1/unload_lora_adapter "
        '({"lora_name", "lora_path"}), which vLLM turns on with VLLM_ALLOW_RUNTIME_LORA_UPDATING',
    )
