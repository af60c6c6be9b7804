"""The requests ``llmkit bench serve`` sends: vLLM's ``random`` dataset and a JSONL of prompts.

``random`` follows vLLM's RandomDataset: lengths drawn uniformly from
``[floor(len * (1 - r)), ceil(len * (1 + r))]``, a shared random prefix, then a run of
consecutive token ids from a random offset, decoded to text and re-encoded so that the
recorded prompt length is what the tokenizer makes of the text sent.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TRIES = 8


@dataclass(frozen=True)
class SampleRequest:
    prompt: str
    prompt_len: int
    expected_output_len: int
    request_id: str


def random_requests(
    tokenizer: Any,
    count: int,
    *,
    input_len: int = 1024,
    output_len: int = 128,
    range_ratio: float = 0.0,
    prefix_len: int = 0,
    seed: int = 0,
    id_prefix: str = "",
) -> list[SampleRequest]:
    """``count`` prompts of random tokens; ``tokenizer`` a transformers tokenizer."""
    if not 0.0 <= range_ratio < 1.0:
        raise ValueError("--random-range-ratio must be in [0, 1)")
    rng = random.Random(seed)
    real_input = max(0, input_len - tokenizer.num_special_tokens_to_add())
    in_low, in_high = _bounds(real_input, range_ratio)
    out_low, out_high = (max(b, 1) for b in _bounds(output_len, range_ratio))
    if prefix_len + in_low < 1:
        raise ValueError(
            "--random-input-len is too small: the shortest prompt would have no tokens; "
            "raise it or --random-prefix-len, or lower --random-range-ratio"
        )
    special = set(tokenizer.all_special_ids)
    allowed = [t for t in range(tokenizer.vocab_size) if t not in special]
    prefix = [rng.choice(allowed) for _ in range(prefix_len)]
    requests = []
    for i in range(count):
        length = rng.randint(in_low, in_high)
        offset = rng.randrange(tokenizer.vocab_size)
        inner = [allowed[(offset + i + j) % len(allowed)] for j in range(length)]
        prompt, prompt_len = _decode_to_length(tokenizer, prefix + inner)
        requests.append(
            SampleRequest(prompt, prompt_len, rng.randint(out_low, out_high), f"{id_prefix}{i}")
        )
    return requests


def _bounds(length: int, ratio: float) -> tuple[int, int]:
    return math.floor(length * (1 - ratio)), math.ceil(length * (1 + ratio))


def _decode_to_length(tokenizer: Any, ids: list[int]) -> tuple[str, int]:
    """Text of ``ids`` that re-encodes to at most ``len(ids)`` tokens where a few tries find
    one (a run of ids may decode to text that tokenizes longer: cut and decode again), and
    the length its own encoding has: the prompt length recorded is always the text's."""
    target = len(ids)
    for _ in range(_TRIES):
        text = tokenizer.decode(ids)
        again = tokenizer(text, add_special_tokens=False).input_ids
        if len(again) <= target:
            break
        ids = again[:target]
    return text, len(again)


def jsonl_requests(
    tokenizer: Any, path: str, count: int, output_len: int, *, seed: int = 0, id_prefix: str = ""
) -> list[SampleRequest]:
    """vLLM's ``custom`` dataset: a JSONL file of ``{"prompt": ...}`` lines, shuffled by
    ``seed``, the first ``count`` taken (reused in turn when the file has fewer);
    ``output_tokens`` on a line overrides ``output_len``."""
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise ValueError(f"{path}:{number}: each line needs a string 'prompt'")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no prompts")
    random.Random(seed).shuffle(rows)
    requests = []
    for i in range(count):
        row = rows[i % len(rows)]
        prompt_len = len(tokenizer(row["prompt"], add_special_tokens=False).input_ids)
        expected = int(row.get("output_tokens", output_len))
        requests.append(SampleRequest(row["prompt"], prompt_len, expected, f"{id_prefix}{i}"))
    return requests
