"""Built-in chat templates, each an entry point of ``llmkit.chat_templates``."""

from __future__ import annotations

# ChatML with Hermes-style tools (as Qwen2.5 writes them): the tools as JSON in the system
# message, calls as <tool_call>{...}</tool_call>, results as <tool_response> user turns.
CHATML = (
    "{%- macro text(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- elif content -%}{{ content | map(attribute='text') | join('') }}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- set rest = messages -%}"
    "{%- if tools or messages[0]['role'] == 'system' -%}"
    "<|im_start|>system\n"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set rest = messages[1:] -%}{{ '\n' + text(messages[0]['content']) }}"
    "{%- endif -%}"
    "{%- if tools -%}"
    "{{ '\n\n# Tools\n\nYou may call one or more functions. Their signatures are within "
    "<tools></tools> XML tags:\n<tools>' }}"
    "{%- for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n"
    'For each call, return {"name": <function-name>, "arguments": <args-json-object>} '
    "within <tool_call></tool_call> XML tags."
    "{%- endif -%}<|im_end|>\n"
    "{%- endif -%}"
    "{%- for message in rest -%}"
    "{%- if message['role'] == 'tool' -%}"
    "<|im_start|>user\n<tool_response>\n{{ text(message['content']) }}\n</tool_response>"
    "<|im_end|>\n"
    "{%- else -%}"
    "<|im_start|>{{ message['role'] }}\n{{ text(message['content']) }}"
    "{%- for call in message['tool_calls'] or [] -%}"
    "{%- set args = call['function']['arguments'] -%}"
    '\n<tool_call>\n{"name": "{{ call[\'function\'][\'name\'] }}", "arguments": '
    "{{ args if args is string else args | tojson }}}\n</tool_call>"
    "{%- endfor -%}"
    "{%- if not (loop.last and continue_final_message) -%}<|im_end|>\n{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}"
)
