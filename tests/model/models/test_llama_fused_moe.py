"""The fused decode kernel on mixtures of experts (kernels/cpu/fused_moe.h): a Qwen3-MoE GGUF
file's stacked Q8_0 and Q4_0 experts, and the routing rules, biases, activations and shared
expert of other families, against the same layers run as modules."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.model.gguf.test_gguf_archs import write_gguf
from torch import nn

from llmkit import LLM, SamplingParams
from llmkit.model.batch import SeqInput
from llmkit.model.layers.activation import ClampedSwiGLU
from llmkit.model.layers.moe import Routing, SparseMoE
from llmkit.model.models import llama_fused

pytestmark = pytest.mark.skipif(
    llama_fused.load() is None, reason="the fused decode kernel does not build here (no AVX2)"
)
# Six requests, 12 routed slots over 8 experts: some expert has rows of two requests.
BLOCKS = [[0, 1, 2], [3, 4], [5], [6, 7], [8, 9], [10]]
PROMPTS = [
    (list(range(10, 43)), 33),
    (list(range(50, 70)), 20),
    ([5, 6, 7], 3),
    ([9] * 17, 17),
    (list(range(100, 120)), 20),
    ([3, 4], 2),
]


@pytest.fixture(scope="module", params=["Q8_0", "Q4_0"])
def moe_file(request, model_factory, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("moe") / f"moe-{request.param}.gguf"
    return write_gguf(model_factory("qwen3_moe"), out, request.param)


def _gpt_oss_like(moe: SparseMoE) -> None:
    """gpt-oss's rule: the top k logits, then their softmax; a router bias, expert biases
    and the clamped SwiGLU (a limit the gate and up values cross)."""
    experts = moe.experts
    moe.routing = Routing(2, softmax_after_top_k=True)
    moe.gate.bias = nn.Parameter(0.5 * torch.randn(experts.num_experts))
    experts.b13 = nn.Parameter(0.1 * torch.randn(experts.num_experts, 2 * experts.inter))
    experts.b2 = nn.Parameter(0.1 * torch.randn(experts.num_experts, experts.hidden))
    experts.act = ClampedSwiGLU(1.702, 0.5)


def _with_shared_expert(moe: SparseMoE, shared: nn.Module) -> SparseMoE:
    """Sigmoid scores renormalized, and a shared expert (of another intermediate size) with
    its sigmoid gate."""
    experts = moe.experts
    routing = Routing(2, scoring="sigmoid", renormalize=True)
    hidden, count = experts.hidden, experts.num_experts
    out = SparseMoE(
        hidden, experts.inter, count, routing, experts.act, shared=shared, shared_gate=True
    )
    out.experts, out.gate = experts, moe.gate
    assert out.shared_expert_gate is not None
    out.shared_expert_gate.weight.data = 0.3 * torch.randn(1, hidden)
    return out


def _runner(file: Path, variant: str):
    llm = LLM(str(file), max_model_len=64, max_num_seqs=6, enable_prefix_caching=False)
    runner = llm._core.runner
    layers = runner.model.model.layers
    torch.manual_seed(0)
    if variant == "gpt-oss-like":
        _gpt_oss_like(layers[0].mlp)
    elif variant == "shared expert":
        layers[0].mlp = _with_shared_expert(layers[0].mlp, layers[1].mlp)
    return llm, runner


@pytest.mark.parametrize("variant", ["qwen3", "gpt-oss-like", "shared expert"])
def test_a_decode_step_equals_the_layers_run_as_modules(moe_file, variant):
    """Six requests of different lengths, layer 0 sparse and layer 1 dense. The numbers are
    the modules' up to float rounding (~1e-7), except where the kernel's RMSNorm, summed in
    another order, moves an activation code across a rounding boundary: one row here, by
    ~1e-2 (a wrong route or weight is O(1))."""
    llm, runner = _runner(moe_file, variant)
    fused = runner.model.model.fused_decode
    runner.execute([SeqInput(ids, 0, b) for (ids, _), b in zip(PROMPTS, BLOCKS)])
    step = [SeqInput([t], n, b) for t, (_, n), b in zip(range(11, 17), PROMPTS, BLOCKS)]
    fused.enabled = False
    expected = runner.execute(step).clone()
    fused.enabled = True
    got = runner.execute(step)
    assert fused._plan is not None  # the kernel ran
    err = ((got - expected).norm(dim=-1) / expected.norm(dim=-1)).sort().values
    assert err[-1].item() < 5e-2 and err[-2].item() < 1e-4, err
    llm.close()


def test_greedy_tokens_and_logprobs_are_the_modules(moe_file, monkeypatch):
    """Six requests decoding together, 12 tokens each: the same greedy tokens, and their
    logprobs the modules' (where a rounding flip as above moved a request's KV, within
    5e-2 from there on; the most of them within 1e-4). The prompts run through the modules
    both times (a prompt's rounding flips would move its KV before the decodes begin: the
    kernel's prompt rows are held to the modules' in test_llama_fused.py)."""
    monkeypatch.setattr(llama_fused, "PREFILL_CONTEXT", 0)
    llm, runner = _runner(moe_file, "qwen3")
    fused = runner.model.model.fused_decode
    params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True, logprobs=0)
    prompts = [ids for ids, _ in PROMPTS]

    def run() -> tuple[list[list[int]], torch.Tensor]:
        outs = [o.outputs[0] for o in llm.generate(prompts, params, use_tqdm=False)]
        logprobs = [p[t].logprob for o in outs for t, p in zip(o.token_ids, o.logprobs or [])]
        return [o.token_ids for o in outs], torch.tensor(logprobs)

    tokens, logprobs = run()
    assert fused._plan is not None
    fused.enabled = False
    want_tokens, want_logprobs = run()
    assert tokens == want_tokens
    diff = (logprobs - want_logprobs).abs()
    assert diff.max().item() < 5e-2 and (diff < 1e-4).float().mean().item() > 0.75, diff
    llm.close()
