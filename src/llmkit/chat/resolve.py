"""Chat template names resolved the same way wherever a template is accepted: the
``--chat-template`` flag, ``LLM.chat``, ``AsyncEngine.chat``, remote engines and the
request field."""

from __future__ import annotations

from pathlib import Path

from llmkit.errors import PluginError
from llmkit.plugins import CHAT_TEMPLATES, find, installed, load
from llmkit.plugins.checks import template_error


def resolve_chat_template(value: str, field: str = "chat_template", files: bool = False) -> str:
    """The template text ``value`` stands for: ``value`` itself if it is Jinja text (it
    must compile), else the ``llmkit.chat_templates`` plugin of that name (``NAME`` or
    ``DISTRIBUTION:NAME``), else, with ``files`` (the CLI flag; never a request's field),
    the file at that path.

    Raises ValueError (PluginError for a broken or ambiguous plugin) whose message starts
    with ``field``.
    """
    try:
        # Names never hold a brace, and every template does.
        if "{" in value:
            return _compiled(value, field)
        if find(CHAT_TEMPLATES, value) is not None:
            template: str = load(CHAT_TEMPLATES, value)
            return template
    except PluginError as exc:
        raise PluginError(f"{field}: {exc}") from None
    if files and Path(value).is_file():
        return _compiled(Path(value).read_text(), f"{field} {value!r}")
    names = ", ".join(installed(CHAT_TEMPLATES)) or "none"
    also = ", a file," if files else ""
    raise ValueError(
        f"{field} {value!r} is neither an installed chat template (installed: {names}; "
        f"`llmkit plugins` lists them){also} nor a Jinja template"
    )


def _compiled(template: str, field: str) -> str:
    # Text without a brace renders no messages, and would be taken for a name later.
    problem = template_error(template) if "{" in template else "it is not a Jinja template"
    if problem is not None:
        raise ValueError(f"{field}: {problem}")
    return template
