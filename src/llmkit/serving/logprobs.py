"""Engine logprobs -> OpenAI's two shapes: completions' parallel lists and chat's entries."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from tokenizers import decoders

from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.outputs import Logprob, PositionLogprobs
from llmkit.protocol.openai import ChatLogprob, ChatTopLogprob, CompletionLogprobs

# JSON has no -inf; vLLM clamps to the same value.
_FLOOR = -9999.0


def _finite(value: float) -> float:
    return value if value > _FLOOR else _FLOOR


@functools.lru_cache(maxsize=1)
def _byte_level_chars() -> dict[str, int]:
    """GPT-2's byte -> printable character table, inverted (byte-level BPE vocabularies)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@functools.lru_cache(maxsize=1 << 16)
def token_repr(tokenizer: Tokenizer, token_id: int) -> tuple[str, bytes]:
    """A token's text and bytes; a token holding part of a UTF-8 character reads ``bytes:\\xe6``.

    That is OpenAI's convention, and it keeps such tokens from sharing one name (U+FFFD)
    in a position's top logprobs.
    """
    text = tokenizer.token_text(token_id)
    if "\ufffd" not in text:
        return text, text.encode("utf-8")
    piece = tokenizer.backend.id_to_token(token_id) or ""
    if match := _BYTE_FALLBACK.match(piece):
        raw = bytes([int(match.group(1), 16)])
    elif isinstance(tokenizer.backend.decoder, decoders.ByteLevel) and all(
        c in _byte_level_chars() for c in piece
    ):
        raw = bytes(_byte_level_chars()[c] for c in piece)
    else:
        return text, text.encode("utf-8")
    try:
        return raw.decode("utf-8"), raw
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw), raw


def _label(tokenizer: Tokenizer, token_id: int, as_ids: bool) -> str:
    """How a logprob names a token: its text, or ``token_id:N`` (vLLM's
    ``--return-tokens-as-token-ids``, for tokens whose text alone is ambiguous)."""
    return f"token_id:{token_id}" if as_ids else token_repr(tokenizer, token_id)[0]


def completion_logprobs(
    tokenizer: Tokenizer,
    token_ids: Sequence[int],
    positions: Sequence[PositionLogprobs | None],
    text_offset: int,
    into: CompletionLogprobs | None = None,
    as_ids: bool = False,
) -> tuple[CompletionLogprobs, int]:
    """Completions' logprobs for these tokens, with text offsets counted from ``text_offset``.

    ``top_logprobs`` holds the chosen token and the top ``k`` (so ``k`` or ``k + 1``
    entries, as in vLLM); a position without logprobs (a prompt's first token) is None.
    ``as_ids`` names tokens ``token_id:N``; offsets still count the text.
    Returns the logprobs and the offset after the last token, for the next chunk.
    """
    out = into if into is not None else CompletionLogprobs()
    for token_id, position in zip(token_ids, positions):
        entry = position.get(token_id) if position is not None else None
        text = token_repr(tokenizer, token_id)[0]
        out.tokens.append(_label(tokenizer, token_id, as_ids))
        out.text_offset.append(text_offset)
        text_offset += len(text)
        if position is None:
            out.token_logprobs.append(None)
            out.top_logprobs.append(None)
            continue
        out.token_logprobs.append(_finite(entry.logprob) if entry is not None else None)
        out.top_logprobs.append(
            {_label(tokenizer, tid, as_ids): _finite(lp.logprob) for tid, lp in position.items()}
        )
    return out, text_offset


def chat_logprobs(
    tokenizer: Tokenizer,
    token_ids: Sequence[int],
    positions: Sequence[PositionLogprobs],
    top_logprobs: int,
    as_ids: bool = False,
) -> list[ChatLogprob]:
    """Chat's ``logprobs.content``: each token with its bytes and the ``top_logprobs`` best.

    ``as_ids`` names tokens ``token_id:N``; ``bytes`` stay the token's own.
    """
    content = []
    for token_id, position in zip(token_ids, positions):
        entry = position.get(token_id)
        raw = token_repr(tokenizer, token_id)[1]
        ranked = sorted(
            (
                (tid, lp)
                for tid, lp in position.items()
                if lp.rank is not None and lp.rank <= top_logprobs
            ),
            key=lambda item: item[1].rank or 0,
        )
        content.append(
            ChatLogprob(
                token=_label(tokenizer, token_id, as_ids),
                logprob=_finite(entry.logprob) if entry is not None else _FLOOR,
                bytes=list(raw),
                top_logprobs=[
                    _top(tokenizer, tid, lp, as_ids) for tid, lp in ranked[:top_logprobs]
                ],
            )
        )
    return content


def _top(tokenizer: Tokenizer, token_id: int, entry: Logprob, as_ids: bool) -> ChatTopLogprob:
    return ChatTopLogprob(
        token=_label(tokenizer, token_id, as_ids),
        logprob=_finite(entry.logprob),
        bytes=list(token_repr(tokenizer, token_id)[1]),
    )
