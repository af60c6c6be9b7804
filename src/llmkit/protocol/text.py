"""Strings from a peer that UTF-8 cannot write: found before they can reach an answer.

A JSON ``"\\ud800"`` escape decodes to a lone UTF-16 surrogate, and msgpack's invalid UTF-8
read with ``unicode_errors="surrogateescape"`` to one in ``\\udc80-\\udcff``. Such a string
is not text: echoed into an error or a reply it would make the connection's encoder fail,
so the request that holds one is refused, naming where it is, never quoting it.
"""

from __future__ import annotations

# The errors handler that turns a message's invalid UTF-8 into surrogates, found here.
UNICODE_ERRORS = "surrogateescape"


def unencodable_path(value: object, path: str = "") -> str | None:
    """Where ``value`` holds a string (a key or a value, at any depth) that UTF-8 cannot
    encode: its path (``messages[0].content``), or its map's path for a key (``""`` at the
    top); None when every string is text. Iterative: a deep message cannot exhaust the stack.
    """
    pending: list[tuple[str, object]] = [(path, value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return where
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                if isinstance(key, str) and not _encodable(key):
                    return where
                children.append((f"{where}.{key}" if where else str(key), child))
            pending.extend(reversed(children))
        elif isinstance(item, list):
            pending.extend((f"{where}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None


def unencodable_message(path: str) -> str:
    """What an error says about the string at ``path`` (from :func:`unencodable_path`)."""
    where = path or "the message"
    return (
        f"{where} holds text that is not valid Unicode (a lone UTF-16 surrogate such as a "
        "\\ud800 escape without its pair, or invalid UTF-8)"
    )


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
