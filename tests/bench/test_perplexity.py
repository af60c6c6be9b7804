"""``llmkit bench perplexity``: the engine's prompt_logprobs give transformers' perplexity."""

from __future__ import annotations

import math
import re

import pytest
import torch
import transformers

from llmkit.bench.perplexity import windows
from llmkit.cli import main

TEXT = (
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with "
    "a single step. All that glitters is not gold; the early bird catches the worm, and "
    "actions speak louder than words. Where there is a will, there is a way. "
) * 2
MAX_MODEL_LEN = 32  # windows of 31 tokens: the text is several


def _transformers_perplexity(model_dir: str, window: int) -> tuple[int, float]:
    """The same windows scored by transformers in float32: (scored tokens, perplexity)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = tokenizer(TEXT)["input_ids"]
    nll, count = 0.0, 0
    # Each window starts on the last token of the one before: every token but the first
    # is scored once, with the context of its own window only.
    for start in range(0, len(ids) - 1, window - 1):
        chunk = torch.tensor([ids[start : start + window]])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(chunk).logits[0, :-1].double(), dim=-1)
        nll -= logprobs.gather(1, chunk[0, 1:, None]).sum().item()
        count += chunk.shape[1] - 1
    return count, math.exp(nll / count)


def test_perplexity_equals_transformers_over_windows(tiny_model, tmp_path, capsys):
    text_file = tmp_path / "text.txt"
    text_file.write_text(TEXT)
    argv = ["bench", "perplexity", str(text_file), "--model", tiny_model]
    assert main([*argv, "--max-model-len", str(MAX_MODEL_LEN)]) == 0
    printed = capsys.readouterr().out
    found = re.search(r"(\d+) tokens scored in (\d+) windows, perplexity ([\d.]+)", printed)
    assert found, printed
    tokens, count, ppl = int(found[1]), int(found[2]), float(found[3])

    expected_tokens, expected = _transformers_perplexity(tiny_model, MAX_MODEL_LEN - 1)
    assert count > 2  # the text is cut into several windows
    assert tokens == expected_tokens
    assert ppl == pytest.approx(expected, rel=1e-4)


def test_windows_score_every_token_but_the_first_once():
    ids = list(range(11))
    assert windows(ids, 4) == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9], [9, 10]]
    assert windows(ids[:4], 4) == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="perplexity needs at least 2"):
        windows([5], 4)


def test_a_missing_file_ends_with_its_name(tiny_model, tmp_path):
    with pytest.raises(SystemExit, match=r"cannot read '.*absent\.txt'"):
        main(["bench", "perplexity", str(tmp_path / "absent.txt"), "--model", tiny_model])
