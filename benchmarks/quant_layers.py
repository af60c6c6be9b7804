"""Per-layer speed of the CPU linear paths on the ~150M shape's weights (issue 18).

    python benchmarks/quant_layers.py [--rows 1,8,32,256,2048] [--methods fp32,w8a8,int4,w4a8]

For each linear layer shape of benchmarks/peers.py's SPEC_150M (qkv 1024->1536, o 1024->1024,
gate_up 1024->5632, down 2816->1024) and each row count, times one forward of: ``fp32``
(oneDNN's packed float32 layer, llmkit's default on CPU), ``w8a8``, ``int4`` and ``w4a8``
(``w4a8-32`` for group size 32; the others use 128). Prints the median ms and GOP/s
(2 * rows * in * out per forward) of each, and each method's speed-up over fp32.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from peers import SPEC_150M
from torch import nn

from llmkit.model.layers.packed import PackedLinear
from llmkit.model.layers.quant import quantized_linear

HIDDEN, MLP = SPEC_150M.hidden_size, SPEC_150M.intermediate_size
KV = SPEC_150M.num_kv_heads * HIDDEN // SPEC_150M.num_heads
SHAPES = {  # name: (in, out)
    "qkv": (HIDDEN, HIDDEN + 2 * KV),
    "o": (HIDDEN, HIDDEN),
    "gate_up": (HIDDEN, 2 * MLP),
    "down": (MLP, HIDDEN),
}


def layer(method: str, linear: nn.Linear) -> nn.Module:
    if method == "fp32":
        return PackedLinear(linear)
    name, _, group = method.partition("-")
    return quantized_linear(linear, name, int(group or 128))


def median_ms(module: nn.Module, x: torch.Tensor) -> float:
    module(x)
    times = []
    deadline = time.perf_counter() + 1.0
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 200):
        t0 = time.perf_counter()
        module(x)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1,8,32,256,2048")
    parser.add_argument("--methods", default="fp32,w8a8,int4,w4a8,w4a8-32")
    args = parser.parse_args()
    methods = args.methods.split(",")
    print(f"threads {torch.get_num_threads()}; ms (GOP/s, x fp32)")
    print(f"{'layer':>8} {'rows':>5} " + " ".join(f"{m:>22}" for m in methods))
    torch.manual_seed(0)
    with torch.inference_mode():
        for name, (k, n) in SHAPES.items():
            linear = nn.Linear(k, n, bias=False)
            modules = {m: layer(m, linear) for m in methods}
            for rows in map(int, args.rows.split(",")):
                x = torch.randn(rows, k)
                ms = {m: median_ms(mod, x) for m, mod in modules.items()}
                base = ms.get("fp32")
                cells = []
                for m in methods:
                    gops = 2 * rows * k * n / ms[m] / 1e6
                    ratio = f", {base / ms[m]:.2f}x" if base else ""
                    cells.append(f"{ms[m]:.3f} ({gops:.0f}{ratio})")
                print(f"{name:>8} {rows:>5} " + " ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
