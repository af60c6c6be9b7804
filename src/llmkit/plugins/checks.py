"""What each plugin group needs of the object an entry point names, checked at load."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# The plugin API's version (``llmkit.plugin_api``): raised when something a plugin may
# rely on changes incompatibly. A plugin states the version it was written for as
# ``requires_llmkit_plugin_api = N``, in its module or on its class.
PLUGIN_API_VERSION = 1


def _api_version(target: Any, module: str) -> str | None:
    wanted = getattr(target, "requires_llmkit_plugin_api", None)
    if wanted is None:
        wanted = getattr(importlib.import_module(module), "requires_llmkit_plugin_api", None)
    if wanted is None or wanted == PLUGIN_API_VERSION:
        return None
    return (
        f"it requires llmkit plugin API {wanted!r}, and this llmkit provides "
        f"{PLUGIN_API_VERSION} (install a version of one that matches the other)"
    )


def _parser_class(target: Any, base: type, base_path: str) -> str | None:
    if not isinstance(target, type) or not issubclass(target, base):
        kind = f"the class {target.__name__}" if isinstance(target, type) else type(target).__name__
        return f"it is {_article(kind)}, not a subclass of {base_path}"
    try:
        target()
    except Exception as exc:  # noqa: BLE001 - any failure to construct makes it unusable
        return f"{target.__name__}() failed: {type(exc).__name__}: {exc}"
    return None


def _article(kind: str) -> str:
    return kind if kind.startswith("the ") else ("an " if kind[0] in "aeiou" else "a ") + kind


def _base(path: str) -> type:
    """A parser base class named as an entry point names its object: the parser packages
    sit above discovery in the layers (they look plugins up by name), so discovery reaches
    their bases by name, when a plugin is checked."""
    module, _, name = path.partition(":")
    base: type = getattr(importlib.import_module(module), name)
    return base


def tool_parser(target: Any) -> str | None:
    """Why ``target`` is not a tool parser class (None if it is one)."""
    base = _base("llmkit.tools.base:ToolParser")
    return _parser_class(target, base, "llmkit.plugin_api.ToolParser")


def reasoning_parser(target: Any) -> str | None:
    """Why ``target`` is not a reasoning parser class (None if it is one)."""
    base = _base("llmkit.reasoning.base:ReasoningParser")
    return _parser_class(target, base, "llmkit.plugin_api.ReasoningParser")


def chat_template(target: Any) -> str | None:
    """Why ``target`` is not a chat template that compiles (None if it is one)."""
    if not isinstance(target, str):
        return f"it is {_article(type(target).__name__)}, not the template text (a str)"
    return template_error(target)


def template_error(template: str) -> str | None:
    """Why ``template`` does not compile in the Jinja environment transformers renders
    chat templates in (None if it compiles)."""
    import jinja2
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        _compile_jinja_template(template)
    except jinja2.TemplateError as exc:
        line = f" (line {exc.lineno})" if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        return f"the Jinja template does not compile{line}: {exc.message or exc}"
    return None


CHECKS: dict[str, Callable[[Any], str | None]] = {
    "llmkit.tool_parsers": tool_parser,
    "llmkit.reasoning_parsers": reasoning_parser,
    "llmkit.chat_templates": chat_template,
}


def check_plugin(group: str, target: Any, module: str) -> str | None:
    """Why the object an entry point of ``group`` names is unusable (None if it is fine)."""
    return _api_version(target, module) or CHECKS[group](target)
