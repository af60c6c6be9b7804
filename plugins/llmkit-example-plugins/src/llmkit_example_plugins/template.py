"""A chat template that shows tools and calls in the ``<function=NAME>{...}</function>``
format the example tool parser reads. ``chat_template_kwargs``: ``system`` sets a default
system prompt."""

from __future__ import annotations

requires_llmkit_plugin_api = 1

TEMPLATE = (
    "{{ bos_token }}"
    "{% if system is defined %}[SYSTEM] {{ system }}\n{% endif %}"
    "{% if tools %}[TOOLS] Call a function as <function=NAME>{arguments}</function>. "
    "Functions:{% for tool in tools %} {{ tool.function.name }}"
    "({{ tool.function.parameters | tojson }}){% endfor %}\n{% endif %}"
    "{% for message in messages %}"
    "[{{ message.role | upper }}] {{ message.content or '' }}"
    "{% for call in message.tool_calls or [] %}"
    "<function={{ call.function.name }}>{{ call.function.arguments | tojson }}</function>"
    "{% endfor %}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}[ASSISTANT] {% endif %}"
)
