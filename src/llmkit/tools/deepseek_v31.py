"""``deepseek_v31``: DeepSeek-V3.1's ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>
{args}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`` (its chat template's format)."""

from __future__ import annotations

from llmkit.tools.sections import SectionParser


class DeepSeekV31ToolParser(SectionParser):
    start_marker = "<｜tool▁calls▁begin｜>"
    special_markup = True
    section_end = "<｜tool▁calls▁end｜>"
    call_begin = "<｜tool▁call▁begin｜>"
    args_begin = "<｜tool▁sep｜>"
    call_end = "<｜tool▁call▁end｜>"
