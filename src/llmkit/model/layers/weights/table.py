"""The weight-kernel registry's facts: each C kernel and each weight format it multiplies.

Standard library only: the kernel build (``llmkit/kernels/cpu/build.py``) loads this file by
path, before llmkit or torch is installed, and writes :func:`header` beside the sources it
compiles as ``formats.h``, so C numbers the kernels, their layouts and the GGUF types as
Python does. :mod:`llmkit.model.layers.weights.registry` binds each entry to its kernel's
Python module.
"""

from __future__ import annotations

from dataclasses import dataclass

# The C kernels, each a file kernels/cpu/<name>.c and a module weights/<name>.py; a kernel's
# number (the fused decode step's ``Part.kind``) is its place here.
KERNELS = ("w4a8", "q8", "kq", "mxfp4")


@dataclass(frozen=True)
class Format:
    """A GGUF tensor type that runs as the file has it: ``block_inputs`` weights in
    ``block_bytes`` bytes of the file, multiplied by ``kernel``; ``layout``: the kernel's name
    for how it holds the type, where the kernel holds several (types held alike share one:
    kq reads Q5_0 as Q5_1)."""

    name: str
    kernel: str
    block_inputs: int
    block_bytes: int
    layout: str = ""

    @property
    def number(self) -> int:
        """The type's number in C (``G_<name>``): its place in :data:`FORMATS`."""
        return FORMATS.index(self)

    @property
    def kernel_number(self) -> int:
        return KERNELS.index(self.kernel)

    @property
    def layout_number(self) -> int:
        """Its layout's number in its kernel (``<KERNEL>_<layout>``; 0 where there is one)."""
        return layouts(self.kernel).index(self.layout) if self.layout else 0


FORMATS = (
    Format("Q4_0", "w4a8", 32, 18),
    Format("Q4_1", "w4a8", 32, 20),
    Format("Q8_0", "q8", 32, 34),
    Format("Q5_0", "kq", 32, 22, "Q5"),
    Format("Q5_1", "kq", 32, 24, "Q5"),
    Format("Q4_K", "kq", 256, 144, "Q4_K"),
    Format("Q5_K", "kq", 256, 176, "Q5_K"),
    Format("Q6_K", "kq", 256, 210, "Q6_K"),
    Format("MXFP4", "mxfp4", 32, 17),
)

# ``quantization=`` methods whose weights a kernel holds: a float weight quantized into the
# kernel of this format (w4a8 at any group size: Q4_1's scale and min per group).
METHODS = {"w8a8": "Q8_0", "w4a8": "Q4_1"}


def layouts(kernel: str) -> tuple[str, ...]:
    """``kernel``'s layouts, in their numbering (empty for a kernel that holds one)."""
    return tuple(dict.fromkeys(f.layout for f in FORMATS if f.kernel == kernel and f.layout))


def _c(name: str) -> str:
    return name.replace("_", "").upper()


def header() -> str:
    """``formats.h``: the kernels' numbers, each kernel's layouts, each type's number and its
    block's size, as C enums and macros."""
    kernels = ", ".join(f"{_c(k)} = {i}" for i, k in enumerate(KERNELS))
    lines = [
        "/* Written by the kernel build from llmkit/model/layers/weights/table.py. */",
        "#ifndef LLMKIT_FORMATS_H",
        "#define LLMKIT_FORMATS_H",
        f"enum {{ {kernels} }}; /* the kernels: a fused step's Part.kind */",
    ]
    for kernel in KERNELS:
        if held := layouts(kernel):
            named = ", ".join(f"{_c(kernel)}_{_c(lay)} = {i}" for i, lay in enumerate(held))
            lines.append(f"enum {{ {named} }}; /* {kernel}'s layouts */")
    types = ", ".join(f"G_{f.name} = {i}" for i, f in enumerate(FORMATS))
    lines.append(f"enum {{ {types} }}; /* the GGUF types */")
    for f in FORMATS:
        lines.append(f"#define BLOCK_BYTES_{f.name} {f.block_bytes}")
        lines.append(f"#define BLOCK_INPUTS_{f.name} {f.block_inputs}")
    lines.append("#endif")
    return "\n".join(lines) + "\n"


BY_NAME = {f.name: f for f in FORMATS}
