"""The plain step: without speculation configured, the engine loads and calls nothing of
the spec package; speculation only adds to the step."""

from __future__ import annotations

import subprocess
import sys

from llmkit import LLM, SamplingParams
from llmkit.engine.core.spec import decoder

GREEDY = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)


def test_an_engine_without_speculation_never_imports_the_spec_package(tiny_model):
    code = (
        "import sys\n"
        "from llmkit import LLM, SamplingParams\n"
        f"llm = LLM({tiny_model!r}, max_model_len=128)\n"
        "out = llm.generate(['Hello there'], SamplingParams(max_tokens=4, ignore_eos=True),"
        " use_tqdm=False)\n"
        "assert len(out[0].outputs[0].token_ids) == 4\n"
        "print(sorted(m for m in sys.modules if m.startswith('llmkit.engine.core.spec')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_plain_step_calls_nothing_of_the_spec_package(tiny_model, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the plain step called speculation")

    for name in ("propose", "fill", "expand", "sample_batch", "verify"):
        monkeypatch.setattr(decoder.SpeculativeDecoder, name, refuse)
    monkeypatch.setattr(decoder, "create_speculative_decoder", refuse)
    llm = LLM(tiny_model, max_model_len=128)
    params = [GREEDY, SamplingParams(temperature=0.8, seed=3, max_tokens=8, logprobs=2)]
    outs = llm.generate(["Hello there", "One two three"], params, use_tqdm=False)
    assert [len(o.outputs[0].token_ids) for o in outs] == [8, 8]
    assert llm.stats().spec_num_drafts == 0
