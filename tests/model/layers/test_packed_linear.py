"""PackedLinear: nn.Linear's numbers from oneDNN's packed weight, on both of its paths."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llmkit import LLM
from llmkit.model.layers.packed import DENSE_ROWS, PackedLinear, pack_linears


@pytest.mark.parametrize("rows", [1, 32, DENSE_ROWS - 1, DENSE_ROWS + 100])
@pytest.mark.parametrize("bias", [True, False])
def test_packed_equals_linear(rows, bias):
    torch.manual_seed(rows)
    linear = nn.Linear(192, 72, bias=bias)
    packed = PackedLinear(linear)
    x = torch.randn(rows, 192)
    # oneDNN sums in another order than MKL: float32 rounding only.
    torch.testing.assert_close(packed(x), linear(x), rtol=1e-5, atol=1e-5)
    assert packed(x.view(1, rows, 192)).shape == (1, rows, 72)
    assert packed.packed.is_mkldnn  # the only copy of the weight, in oneDNN's layout


def test_engine_packs_its_linears_but_not_the_head(model_factory):
    llm = LLM(model_factory("llama"))
    model = llm._core.runner.model
    layer = model.model.layers[0]
    assert isinstance(layer.self_attn.qkv_proj, PackedLinear)
    assert isinstance(layer.mlp.down_proj, PackedLinear)
    assert isinstance(model.lm_head, nn.Linear)
    assert pack_linears(nn.Sequential()) == 0
