"""The fused decode kernel (kernels/cpu/llama_decode.c): every layer of a w4a8 llama-family
decode step in one C call, against the same layers run as modules."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch

from llmkit import LLM
from llmkit.model.batch import SeqInput
from llmkit.model.layers.formats import FORMATS
from llmkit.model.layers.native import NativeLinear, Part
from llmkit.model.models import llama_fused

pytestmark = pytest.mark.skipif(
    llama_fused.load() is None, reason="the fused decode kernel does not build here (no AVX2)"
)
BLOCKS = [[0, 1, 2], [3, 4], [5], [6, 7]]
PROMPTS = [(list(range(10, 43)), 33), (list(range(50, 70)), 20), ([5, 6, 7], 3), ([9] * 17, 17)]


def runner_of(model: str, quantization: str = "w4a8"):
    llm = LLM(model, quantization=quantization, max_model_len=64, max_num_seqs=4)
    return llm, llm._core.runner


def prefill_all(runner) -> None:
    runner.execute([SeqInput(ids, 0, b) for (ids, _), b in zip(PROMPTS, BLOCKS)])


def decodes(tokens: list[int]) -> list[SeqInput]:
    return [SeqInput([t], n, b) for t, (_, n), b in zip(tokens, PROMPTS, BLOCKS)]


@pytest.mark.parametrize(
    ("spec", "quantization"),
    [
        ("llama", "w4a8"),
        ("qwen2", "w4a8"),
        ("mistral", "w4a8"),
        ("llama", "w8a8"),
        ("qwen2", "w8a8"),
    ],
)
def test_a_decode_step_equals_the_layers_run_as_modules(model_factory, spec, quantization):
    """Four requests of different lengths, each over its own blocks; qwen2 adds q/k/v
    biases, mistral GQA; w4a8 and q8 (w8a8) weights. The kernel's RMSNorm sums in another
    order than torch's, which can move an activation code sitting on a rounding boundary:
    the rows agree to ~1e-3."""
    llm, runner = runner_of(model_factory(spec), quantization)
    err = kernel_against_modules(runner)
    assert err.max().item() < 1e-2, err
    llm.close()


def kernel_against_modules(runner) -> torch.Tensor:
    """Four requests' decode step through the kernel against the same step with the kernel
    off: each row's relative error."""
    fused = runner.model.model.fused_decode
    prefill_all(runner)
    step = decodes([11, 12, 13, 14])
    fused.enabled = False
    expected = runner.execute(step).clone()
    fused.enabled = True
    got = runner.execute(step)
    assert fused._plan is not None  # the kernel ran
    return (got - expected).norm(dim=-1) / expected.norm(dim=-1)


@pytest.mark.parametrize("quantization", ["w4a8", "w8a8"])
def test_a_decode_row_is_the_same_whether_or_not_its_step_has_a_prefill(
    model_factory, quantization
):
    """Bit for bit: in a mixed step the decodes still go to the kernel, the prefill through
    the modules, so a request's tokens never depend on what shares its step."""
    llm, runner = runner_of(model_factory("llama"), quantization)
    prefill_all(runner)
    alone = runner.execute(decodes([21, 22, 23]))
    prefill = SeqInput(list(range(30, 47)), 0, BLOCKS[3])
    mixed = runner.execute([*decodes([21, 22, 23])[:2], prefill, decodes([21, 22, 23])[2]])
    assert torch.equal(mixed[[0, 1, 19]], alone)
    # and the prefill's rows are what it computes alone
    assert torch.equal(mixed[2:19], runner.execute([prefill]))
    llm.close()


def test_models_the_kernel_does_not_fit_run_their_modules(model_factory):
    """float32 layers (no quantization) and q/k-normed layers (qwen3) are not w4a8 llama
    layers: the kernel declines and the modules run."""
    llm = LLM(model_factory("llama"), max_model_len=64, max_num_seqs=4)
    runner = llm._core.runner
    prefill_all(runner)
    runner.execute(decodes([1, 2, 3, 4]))
    assert runner.model.model.fused_decode._plan is None
    llm.close()
    llm, runner = runner_of(model_factory("qwen3"))
    prefill_all(runner)
    runner.execute(decodes([1, 2, 3, 4]))
    assert runner.model.model.fused_decode._plan is None
    llm.close()


def test_a_layer_with_a_format_the_kernel_has_no_matmul_for_is_declined():
    """A format of the registry that the step does not multiply sends its layer to the
    modules rather than to another format's matmul."""

    class Other(NamedTuple):
        codes: torch.Tensor

    part = Part(FORMATS["Q8_0"], Other(torch.zeros(1, 8, 32, dtype=torch.int8)), 8)
    assert llama_fused._linear(NativeLinear([part], 32, 8, None)) is None
