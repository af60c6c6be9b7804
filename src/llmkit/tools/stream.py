"""Tool calls out of a growing text: OpenAI ``tool_calls`` deltas, or the calls at once."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from llmkit.tools.base import Scan, ScannedCall, ToolParser


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class ToolCall:
    """A finished call: OpenAI's ``{"id", "type": "function", "function": {name, arguments}}``."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallDelta:
    """One ``tool_calls`` entry of a stream delta: the first for a call carries ``id`` and
    ``name``; later ones only ``index`` and an ``arguments`` fragment."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass
class _Sent:
    id: str
    name: str
    arguments: str = ""


@dataclass
class ToolCallStream:
    """Feeds text deltas through a parser; returns the content and tool-call deltas.

    ``max_calls`` keeps only the first calls (1 when parallel calls are off).
    """

    parser: ToolParser
    max_calls: int | None = None
    text: str = ""
    _content: str = ""
    _sent: list[_Sent] = field(default_factory=list)

    def feed(self, delta: str, final: bool = False) -> tuple[str, list[ToolCallDelta]]:
        """The content and tool-call deltas that ``delta`` (and, if ``final``, the end of
        the text) brings."""
        self.text += delta
        scan = self.parser.scan(self.text, final)
        content = ""
        if scan.content.startswith(self._content):
            content = scan.content[len(self._content) :]
            self._content = scan.content
        deltas: list[ToolCallDelta] = []
        for index, call in enumerate(_named(scan, self.max_calls)):
            if index == len(self._sent):
                assert call.name is not None
                self._sent.append(_Sent(call.id or new_call_id(), call.name))
                deltas.append(ToolCallDelta(index, self._sent[index].id, call.name))
            sent = self._sent[index]
            if len(call.arguments) > len(sent.arguments) and call.arguments.startswith(
                sent.arguments
            ):
                fragment = call.arguments[len(sent.arguments) :]
                sent.arguments = call.arguments
                if deltas and deltas[-1].index == index and not deltas[-1].arguments:
                    deltas[-1] = ToolCallDelta(index, deltas[-1].id, deltas[-1].name, fragment)
                else:
                    deltas.append(ToolCallDelta(index, arguments=fragment))
        return content, deltas

    @property
    def calls(self) -> list[ToolCall]:
        """The calls sent so far, whole."""
        return [ToolCall(s.id, s.name, s.arguments) for s in self._sent]


def extract_tool_calls(
    parser: ToolParser, text: str, max_calls: int | None = None
) -> tuple[str, list[ToolCall]]:
    """The content and calls of a whole text."""
    scan = parser.scan(text, final=True)
    calls = [
        ToolCall(c.id or new_call_id(), c.name or "", c.arguments) for c in _named(scan, max_calls)
    ]
    return scan.content, calls


def _named(scan: Scan, max_calls: int | None) -> list[ScannedCall]:
    calls = [c for c in scan.calls if c.name]
    return calls if max_calls is None else calls[:max_calls]
