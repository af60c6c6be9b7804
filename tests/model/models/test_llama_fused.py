"""The fused decode kernel (kernels/cpu/llama_decode.c): every layer of a w4a8 llama-family
decode step in one C call, against the same layers run as modules."""

from __future__ import annotations

import copy
from typing import NamedTuple

import pytest
import torch
from torch import nn

from llmkit import LLM
from llmkit.model.batch import SeqInput
from llmkit.model.layers.activation import GeluTanhAndMul
from llmkit.model.layers.native import NativeLinear, Part
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.layers.rotary import RotaryEmbedding
from llmkit.model.layers.weights.registry import FORMATS
from llmkit.model.models import llama_fused, llama_fused_view

pytestmark = pytest.mark.skipif(
    llama_fused.load() is None, reason="the fused decode kernel does not build here (no AVX2)"
)
BLOCKS = [[0, 1, 2], [3, 4], [5], [6, 7]]
PROMPTS = [(list(range(10, 43)), 33), (list(range(50, 70)), 20), ([5, 6, 7], 3), ([9] * 17, 17)]


def runner_of(model: str, quantization: str = "w4a8"):
    llm = LLM(model, quantization=quantization, max_model_len=64, max_num_seqs=4)
    return llm, llm._core.runner


def _groups(blocks: list[int], groups: int) -> list[list[int]]:
    """The blocks of each KV cache group after the first: the same, 8 ids further each."""
    return [[b + 8 * g for b in blocks] for g in range(1, groups)]


def prefill_all(runner) -> None:
    groups = len(runner.kv_layout.windows)
    runner.execute(
        [
            SeqInput(ids, 0, b, group_block_ids=_groups(b, groups))
            for (ids, _), b in zip(PROMPTS, BLOCKS)
        ]
    )


def decodes(tokens: list[int], groups: int = 1) -> list[SeqInput]:
    return [
        SeqInput([t], n, b, group_block_ids=_groups(b, groups))
        for t, (_, n), b in zip(tokens, PROMPTS, BLOCKS)
    ]


@pytest.mark.parametrize(
    ("spec", "quantization"),
    [
        ("llama", "w4a8"),
        ("qwen2", "w4a8"),
        ("mistral", "w4a8"),
        ("qwen3", "w4a8"),
        ("llama", "w8a8"),
        ("qwen2", "w8a8"),
    ],
)
def test_a_decode_step_equals_the_layers_run_as_modules(model_factory, spec, quantization):
    """Four requests of different lengths, each over its own blocks; qwen2 adds q/k/v
    biases, mistral GQA, qwen3 RMSNorm on q and k; w4a8 and q8 (w8a8) weights. The kernel's
    RMSNorm sums in another order than torch's, which can move an activation code sitting on
    a rounding boundary: the rows agree to ~1e-3."""
    llm, runner = runner_of(model_factory(spec), quantization)
    err = kernel_against_modules(runner)
    assert err.max().item() < 1e-2, err
    llm.close()


def kernel_against_modules(runner, step: list[SeqInput] | None = None) -> torch.Tensor:
    """A step (by default four requests' decodes, after their prompts) through the kernel
    against the same step with the kernel off: each row's relative error."""
    fused = runner.model.model.fused_decode
    if step is None:
        prefill_all(runner)
        step = decodes([11, 12, 13, 14], len(runner.kv_layout.windows))
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
    """Bit for bit: a decode row's numbers (its attention's spans too) follow its own
    length, not the step's, and a prefill's rows are a row each, so a request's tokens never
    depend on what shares its step."""
    llm, runner = runner_of(model_factory("llama"), quantization)
    prefill_all(runner)
    alone = runner.execute(decodes([21, 22, 23]))
    prefill = SeqInput(list(range(30, 47)), 0, BLOCKS[3])
    mixed = runner.execute([*decodes([21, 22, 23])[:2], prefill, decodes([21, 22, 23])[2]])
    assert torch.equal(mixed[[0, 1, 19]], alone)
    # and the prefill's rows are what it computes alone
    assert torch.equal(mixed[2:19], runner.execute([prefill]))
    llm.close()


@pytest.mark.parametrize("quantization", ["w4a8", "w8a8"])
def test_a_prompt_step_equals_the_layers_run_as_modules(model_factory, quantization):
    """Four prompts in one step through the kernel, each row a causal query over the keys
    its chunk wrote (a row seeing a later key, or missing its own, is off by O(1)), against
    the modules; the rows agree to ~1e-3 (as a decode step's: a rounding flip moves a row,
    and the rows after it in its prompt, by ~1e-2 at most)."""
    llm, runner = runner_of(model_factory("qwen3"), quantization)
    err = kernel_against_modules(runner, [SeqInput(i, 0, b) for (i, _), b in zip(PROMPTS, BLOCKS)])
    assert err.max().item() < 5e-2 and err.median().item() < 1e-4, err
    llm.close()


def test_a_prompt_past_the_kernels_context_runs_its_modules(model_factory, monkeypatch):
    """A chunk whose context is longer than PREFILL_CONTEXT goes through the modules (its
    rows attend faster batched); a shorter one and the decodes beside it, the kernel."""
    llm, runner = runner_of(model_factory("llama"))
    prefill_all(runner)
    monkeypatch.setattr(llama_fused, "PREFILL_CONTEXT", 10)
    model = runner.model.model
    ran: list[int] = []
    run_layers = model.run_layers
    monkeypatch.setattr(
        model, "run_layers", lambda x, ctx: ran.append(len(x)) or run_layers(x, ctx)
    )
    long = SeqInput(list(range(30, 47)), 0, BLOCKS[3])
    short = SeqInput([5, 6], 0, BLOCKS[2])
    runner.execute([*decodes([21, 22])[:2], short, long])
    assert ran == [17]  # the long prompt's rows alone
    llm.close()


def test_models_the_kernel_does_not_fit_run_their_modules(model_factory):
    """float32 layers (no quantization) and float experts (a qwen3_moe folder's, which
    ``quantization`` leaves float) are not the kernel's formats: it declines, the modules run."""
    for model, quantization in [("llama", None), ("qwen3_moe", "w4a8")]:
        llm = LLM(model_factory(model), quantization=quantization, max_model_len=64, max_num_seqs=4)
        runner = llm._core.runner
        prefill_all(runner)
        runner.execute(decodes([1, 2, 3, 4]))
        assert runner.model.model.fused_decode._plan is None
        llm.close()


def test_attention_specs_norms_and_activations_of_other_families(model_factory):
    """Layers as gpt-oss and Gemma build them, made from a llama's: layer 0 with a sliding
    window shorter than three of the four requests and a sink per head; layer 1 with a
    soft-cap on the scores, a rotary table of its own, sandwich norms and GELU(tanh)."""
    llm, runner = runner_of(model_factory("llama"))
    model = runner.model.model
    first, second = model.layers
    torch.manual_seed(0)
    first.self_attn.window = 6
    first.self_attn.sinks = nn.Parameter(torch.randn(first.self_attn.num_heads))
    second.self_attn.softcap = 0.5
    cfg = copy.deepcopy(runner.model.config)
    cfg.rope_parameters = {"rope_type": "default", "rope_theta": 100.0}
    model.rotaries["local"] = RotaryEmbedding(cfg, cfg.max_position_embeddings)
    second.self_attn.rope = "local"
    hidden = model.norm.weight.shape[0]
    second.sandwich = True
    for name in ("pre_feedforward_layernorm", "post_feedforward_layernorm"):
        norm = RMSNorm(hidden, model.norm.eps)
        norm.weight.data = 1 + 0.3 * torch.randn(hidden)
        setattr(second, name, norm)
    second.mlp.act = GeluTanhAndMul()
    err = kernel_against_modules(runner)
    assert err.max().item() < 1e-2, err
    llm.close()


def test_a_layer_with_a_format_the_kernel_has_no_matmul_for_is_declined():
    """A format of the registry that the step does not multiply sends its layer to the
    modules rather than to another format's matmul."""

    class Other(NamedTuple):
        codes: torch.Tensor

    part = Part(FORMATS["Q8_0"], Other(torch.zeros(1, 8, 32, dtype=torch.int8)), 8)
    assert llama_fused_view.linear(NativeLinear([part], 32, 8, None)) is None


def test_gpt_oss_with_mxfp4_experts_decodes_as_its_modules_do(model_factory, tmp_path):
    """A gpt-oss GGUF file as published: its experts MXFP4 (the rest Q8_0) go through the
    fused step's experts (fused_moe.h, the rows' code sums copied into slot order with
    their codes), beside windowed attention with sinks."""
    from tests.model.gguf.test_gguf_archs import write_gguf

    mix = lambda name: "MXFP4" if "_exps." in name else "Q8_0"  # noqa: E731
    file = write_gguf(model_factory("gpt_oss"), tmp_path / "gpt-oss.gguf", mix)
    llm = LLM(str(file), max_model_len=64, max_num_seqs=4)
    runner = llm._core.runner
    err = kernel_against_modules(runner)
    plan = runner.model.model.fused_decode._plan
    assert plan is not None and sum(e is not None for e in plan.experts) == 2
    assert all(e.gate_up.sums and e.down.sums for e in plan.experts if e is not None)
    assert err.max().item() < 1e-2, err
    llm.close()


@pytest.mark.parametrize(("arch", "experts"), [("qwen3_moe", "Q8_0"), ("gpt_oss", "MXFP4")])
def test_a_long_prompts_expert_blocks_are_one_call_each_and_equal_their_modules(
    model_factory, tmp_path, monkeypatch, arch, experts
):
    """Prompts past PREFILL_CONTEXT run their layers as modules, but each mixture of experts'
    block is one C call (moe_block) on all their rows: the same routing, kernels and order of
    sums as the modules', so their rows agree as the fused step's do."""
    from tests.model.gguf.test_gguf_archs import write_gguf

    mix = lambda name: experts if "_exps." in name else "Q8_0"  # noqa: E731
    file = write_gguf(model_factory(arch), tmp_path / f"{arch}.gguf", mix)
    llm = LLM(str(file), max_model_len=64, max_num_seqs=4)
    runner = llm._core.runner
    monkeypatch.setattr(llama_fused, "PREFILL_CONTEXT", 10)
    rows: list[int] = []
    block = llama_fused.moe_block
    monkeypatch.setattr(llama_fused, "moe_block", lambda v, x: rows.append(len(x)) or block(v, x))
    groups = len(runner.kv_layout.windows)
    step = [
        SeqInput(i, 0, b, group_block_ids=_groups(b, groups)) for (i, _), b in zip(PROMPTS, BLOCKS)
    ]
    err = kernel_against_modules(runner, step)
    blocks = runner.model.model.fused_decode._plan.blocks  # the expert layers'
    assert blocks and rows == [33 + 20 + 17] * len(blocks)  # the 3-token prompt: the step's
    assert all(mlp.block is None for mlp, _ in blocks)  # set only while the step ran
    assert err.max().item() < 5e-2 and err.median().item() < 1e-4, err
    llm.close()
