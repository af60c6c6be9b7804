"""``--chat-template``: an installed template's name, a file, or the template itself."""

from __future__ import annotations

from pathlib import Path

from llmkit.errors import PluginError
from llmkit.plugins import CHAT_TEMPLATES, installed, load


def resolve_chat_template(value: str) -> str:
    """The template text ``value`` stands for: the ``llmkit.chat_templates`` plugin of that
    name, else the file at that path, else ``value`` itself if it is a Jinja template.

    Raises ValueError (PluginError for a broken plugin) saying what was tried.
    """
    if value in installed(CHAT_TEMPLATES):
        template = load(CHAT_TEMPLATES, value)
        if not isinstance(template, str):
            raise PluginError(
                f"chat template plugin {value!r} is a {type(template).__name__}, not the "
                "template text (a str)"
            )
        return template
    path = Path(value)
    if path.is_file():
        return path.read_text()
    if "{" in value:
        return value
    names = ", ".join(installed(CHAT_TEMPLATES)) or "none"
    raise ValueError(
        f"{value!r} is not an installed chat template (installed: {names}), a file, or "
        "a Jinja template"
    )
