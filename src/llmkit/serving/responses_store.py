"""The responses kept for ``previous_response_id`` and ``GET /v1/responses/{id}``: in
memory, by id, at most ``max_entries`` (the oldest go first); a restart forgets them."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from llmkit.protocol.openai.responses import ResponseObject

MAX_STORED_RESPONSES = 1000


@dataclass
class StoredResponse:
    response: ResponseObject
    # The conversation as chat messages, the response's own output included, for the next.
    messages: list[dict[str, Any]]


class ResponseStore:
    """Stored responses by id; least recently stored evicted past ``max_entries``."""

    def __init__(self, max_entries: int = MAX_STORED_RESPONSES):
        self.max_entries = max_entries
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()

    def put(self, stored: StoredResponse) -> None:
        self._items[stored.response.id] = stored
        self._items.move_to_end(stored.response.id)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def get(self, response_id: str) -> StoredResponse | None:
        return self._items.get(response_id)

    def delete(self, response_id: str) -> bool:
        return self._items.pop(response_id, None) is not None
