"""``kimi_k2``: Kimi-K2-Instruct's chat template: tools as compact JSON in a ``tool_declare``
turn, calls in a ``<|tool_calls_section_begin|>`` section under their ids
(``functions.NAME:IDX``), each result as ``## Return of ID`` in a turn named for its tool."""

from __future__ import annotations

KIMI_K2 = r"""{%- macro render_content(msg) -%}
    {%- set c = msg.get('content') -%}
    {%- if c is string -%}
        {{- c -}}
    {%- elif c is not none -%}
        {%- for part in c -%}
            {%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- if tools -%}
  <|im_system|>tool_declare<|im_middle|>{{ tools | tojson(separators=(',', ':')) }}<|im_end|>
{%- endif -%}
{%- if messages | length == 0 or messages[0]['role'] != 'system' -%}
  <|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>
{%- endif -%}
{%- for message in messages -%}
  {%- if message['role'] == 'system' -%}
    <|im_system|>system<|im_middle|>
  {%- elif message['role'] == 'user' -%}
    <|im_user|>user<|im_middle|>
  {%- elif message['role'] == 'assistant' -%}
    <|im_assistant|>assistant<|im_middle|>
  {%- else -%}
    <|im_system|>{{ message.get('name') or 'tool' }}<|im_middle|>
  {%- endif -%}
  {%- if message['role'] == 'assistant' and message.get('tool_calls') -%}
    {{- render_content(message) -}}<|tool_calls_section_begin|>
    {%- for tool_call in message['tool_calls'] -%}
      {%- set args = tool_call['function']['arguments'] -%}
      <|tool_call_begin|>{{ tool_call['id'] }}<|tool_call_argument_begin|>{{ args if args is string else args | tojson }}<|tool_call_end|>
    {%- endfor -%}
    <|tool_calls_section_end|>
  {%- elif message['role'] == 'tool' -%}
    ## Return of {{ message.get('tool_call_id') }}
{{ render_content(message) }}
  {%- else -%}
    {{- render_content(message) -}}
  {%- endif -%}
  <|im_end|>
{%- endfor -%}
{%- if add_generation_prompt -%}
  <|im_assistant|>assistant<|im_middle|>
{%- endif -%}"""
