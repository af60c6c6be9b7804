"""``kimi_k2``: Kimi-K2's ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{args}<|tool_call_end|>...<|tool_calls_section_end|>``."""

from __future__ import annotations

from llmkit.tools.base import ScannedCall
from llmkit.tools.sections import SectionParser


class KimiK2ToolParser(SectionParser):
    start_marker = "<|tool_calls_section_begin|>"
    special_markup = True
    section_end = "<|tool_calls_section_end|>"
    call_begin = "<|tool_call_begin|>"
    args_begin = "<|tool_call_argument_begin|>"
    call_end = "<|tool_call_end|>"

    def header(self, text: str, index: int) -> ScannedCall:
        # The header is the call's id, functions.NAME:IDX; Kimi's template writes the id
        # back and the tool result names it, so the id the client sees is the model's.
        call_id = text.strip()
        name = call_id.split(":")[0].split(".")[-1]
        return ScannedCall(name, "", call_id or None)
