"""Quantized linear layers: int8 / int4 weight-only on torch's kernels, w8a8 and w4a8 on ours.

The weights are quantized once from the loaded full-precision layer. int8: one symmetric
scale per output channel. int4: asymmetric, a scale and a zero per group of ``group_size``
input columns of each output channel.

- ``int8``, ``int4``: weight-only, on torch's packed kernels (``_weight_int8pack_mm``,
  ``_weight_int4pack_mm[_for_cpu]``) with bfloat16 activations; float32 inputs take a CPU
  path 8-40x slower than float32 GEMM (measured on AVX2 at 32..256 rows). From
  ``DEQUANT_ROWS`` rows on (prefill) the CPU kernels lose to float32 GEMM, so the layer
  dequantizes. On this AVX2 CPU they save memory, not time.
- ``w8a8``, ``w4a8`` (CPU): methods that are formats of the weight-kernel registry
  (:data:`~llmkit.model.layers.weights.registry.METHODS`), so a layer is a
  :class:`NativeLinear` as a GGUF file's are, its weight quantized into the format.
  ``w8a8``: llama.cpp's Q8_0 x Q8_0, int8 weights and int8 activations with a scale per 32
  inputs each, on the q8 kernel. It replaced fbgemm's int8 GEMM, whose one scale per tensor
  (made per token by dividing each row by its peak) left 7-bit activations: SmolLM2's
  perplexity was 5% above float32's. ``w4a8``: 4-bit weights (a scale and min per group) and
  int8 activations (a scale per 32 inputs of a token, as llama.cpp's q8_1) on the w4a8
  kernel, at every row count: it beats float32 GEMM at prefill sizes too, so it never
  dequantizes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmkit.config.checks import INT4_GROUP_SIZES, QUANTIZATIONS
from llmkit.model.layers.native import NativeEmbedding, NativeLinear, Part
from llmkit.model.layers.swap import replace_linears
from llmkit.model.layers.weights.registry import FORMATS, METHODS

_aten = torch.ops.aten
_ACT = torch.bfloat16
# From this many rows (prefill) on CPU, dequantizing the weight and running the model
# dtype's GEMM beats the packed kernels (2.1x slower than float32 GEMM on a 3578-row prefill
# of the ~150M benchmark model); below it (decode) the kernels read 4-8x fewer bytes.
DEQUANT_ROWS = 256


def has_kernels(method: str, device: torch.device) -> bool:
    """Whether this torch build has ``method``'s kernels on ``device``'s type."""
    if method in METHODS:  # the C kernels, else the same math in torch ops
        return device.type == "cpu"
    op = "_weight_int8pack_mm" if method == "int8" else "_weight_int4pack_mm"
    if method == "int4" and device.type == "cpu":
        op = "_weight_int4pack_mm_for_cpu"
    key = "CUDA" if device.type == "cuda" else "CPU"
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", key))


class QuantizedLinear(nn.Module):
    """``y = x W^T + b`` with ``W`` quantized by ``method``, int8 or int4, for torch's
    weight-only kernels (see the module docstring)."""

    qweight: torch.Tensor
    scales: torch.Tensor  # int8
    scale_zeros: torch.Tensor  # int4: [in / group, out, 2]
    codes: torch.Tensor  # int4 on CPU: two codes a byte, for dequantized()

    def __init__(self, linear: nn.Linear, method: str, group_size: int = 128) -> None:
        super().__init__()
        weight = linear.weight.detach()
        self.method = method
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.dtype, self.device = weight.dtype, weight.device
        self.bias = linear.bias
        if method == "int8":
            self._int8(weight.float())
        elif method == "int4":
            self._int4(weight.float(), group_size)
        else:
            raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}")

    def _int8(self, w: torch.Tensor) -> None:
        scales = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
        self.register_buffer("qweight", q)
        self.register_buffer("scales", scales.to(_ACT))

    def _int4(self, w: torch.Tensor, group_size: int) -> None:
        k = self.in_features
        self.group_size = group = min(group_size, k)
        if group not in INT4_GROUP_SIZES or k % group:
            raise ValueError(
                f"int4 quantization needs each linear layer's input size to be a multiple of a "
                f"group size in {INT4_GROUP_SIZES}; a layer has {k} inputs and group size {group}"
            )
        # The packed kernels take output channels in multiples of 16: pad with zero rows.
        n = -(-self.out_features // 16) * 16
        w = torch.cat([w, w.new_zeros(n - self.out_features, k)])
        groups = w.view(n, k // group, group)
        low, high = groups.amin(dim=-1), groups.amax(dim=-1)
        scales = ((high - low) / 15).clamp(min=1e-6)
        q = torch.round((groups - low[..., None]) / scales[..., None]).clamp(0, 15)
        q = q.to(torch.int32).view(n, k)
        # The kernels compute (q - 8) * scale + zero, so zero is the value of q = 8.
        zeros = low + 8 * scales
        scale_zeros = torch.stack([scales, zeros], dim=-1).transpose(0, 1).contiguous()
        if self.device.type == "cpu":
            packed = _aten._convert_weight_to_int4pack_for_cpu(q, 1)
            # The kernel's layout is its own; keep the codes two to a byte for dequantizing.
            self.register_buffer("codes", (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8))
        else:
            pairs = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
            tiles = next(t for t in (8, 4, 2, 1) if k % (t * 16) == 0)
            packed = _aten._convert_weight_to_int4pack(pairs, tiles)
        self.register_buffer("qweight", packed)
        self.register_buffer("scale_zeros", scale_zeros.to(_ACT))

    def dequantized(self) -> torch.Tensor:
        """The weight ``[out, in]`` in the model's dtype, as the kernels see it (CPU)."""
        if self.method == "int8":
            return self.qweight.to(self.dtype) * self.scales.to(self.dtype)[:, None]
        n, half = self.codes.shape
        q = torch.stack([self.codes >> 4, self.codes & 15], dim=-1).view(n, -1, self.group_size)
        scales, zeros = self.scale_zeros.to(self.dtype).transpose(0, 1).unbind(-1)
        w = (q.to(self.dtype) - 8) * scales[..., None] + zeros[..., None]
        return w.view(n, 2 * half)[: self.out_features]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, self.in_features)
        if self.device.type == "cpu" and x.shape[0] >= DEQUANT_ROWS:
            out = F.linear(x, self.dequantized())
        else:
            out = self._packed_mm(x.to(_ACT).contiguous())[:, : self.out_features].to(self.dtype)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*shape[:-1], self.out_features)

    def _packed_mm(self, x: torch.Tensor) -> torch.Tensor:
        """Torch's weight-only kernels on bfloat16 ``x``; int4's output is padded to 16."""
        if self.method == "int8":
            return _aten._weight_int8pack_mm(x, self.qweight, self.scales)
        if self.device.type == "cpu":
            return _aten._weight_int4pack_mm_for_cpu(
                x, self.qweight, self.group_size, self.scale_zeros
            )
        return _aten._weight_int4pack_mm(x, self.qweight, self.group_size, self.scale_zeros)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, {self.method}"


def quantize_linears(model: nn.Module, method: str, group_size: int = 128) -> int:
    """Replace the model's linear layers, except its lm_head, by :func:`quantized_linear`'s; returns
    how many were replaced (the head: :func:`quantize_head`). Layers already quantized (a
    GGUF file's, loaded as they are) are not ``nn.Linear`` and stay."""
    device = next(model.parameters()).device
    if not has_kernels(method, device):
        raise ValueError(
            f"quantization={method!r} needs torch's {method} kernels, which this torch "
            f"build lacks on {device.type}"
        )
    return replace_linears(model, lambda linear: quantized_linear(linear, method, group_size))


def quantized_linear(linear: nn.Linear, method: str, group_size: int = 128) -> nn.Module:
    """``linear`` quantized by ``method``: a registry format's :class:`NativeLinear` for
    w8a8 and w4a8, a :class:`QuantizedLinear` for torch's int8 and int4."""
    fmt = METHODS.get(method)
    if fmt is None:
        return QuantizedLinear(linear, method, group_size)
    assert fmt.kernel.quantize is not None
    packed = fmt.kernel.quantize(linear.weight.detach(), group_size)
    fmt.kernel.load()  # builds the kernel at model load, not in a request's first step
    n, k = linear.out_features, linear.in_features
    # The float layer's own bias parameter, loader included: a GGUF's native layers are put
    # in place before the rest of the file (their biases too) is loaded.
    return NativeLinear([Part(fmt, packed, n)], k, n, linear.bias, linear.weight.dtype)


# The methods that quantize activations on CPU: their head goes to q8 as well.
HEAD_METHODS = tuple(METHODS)


def quantize_head(model: nn.Module) -> bool:
    """The LM head, and the embedding tied to it, as q8 weights (8 bits and a scale per 32
    inputs, activations likewise): at decode a small model's head reads more bytes than all
    its layers (SmolLM2-135M: 113 MB in float32 against 85 MB of w4a8 layers). Not for a
    sharded head (its ranks' logits are gathered). Returns whether it was replaced."""
    head = getattr(model, "lm_head", None)
    if not isinstance(head, nn.Linear) or getattr(getattr(head, "tp", None), "size", 1) > 1:
        return False
    q8 = FORMATS["Q8_0"]
    assert q8.kernel.quantize is not None
    weight = head.weight.detach()
    part = Part(q8, q8.kernel.quantize(weight, q8.spec.block_inputs), head.out_features)
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if isinstance(child, nn.Embedding) and child.weight is head.weight:
                embedding = NativeEmbedding(part, child.embedding_dim, child.weight.dtype)
                setattr(parent, name, embedding)
    q8.kernel.load()  # builds the kernel at model load, not in a request's first step
    model.lm_head = NativeLinear([part], head.in_features, head.out_features, head.bias)
    return True
