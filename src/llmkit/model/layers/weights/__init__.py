"""The weight-kernel registry: every weight format that runs as it is held, and its kernel.

- :mod:`.table`: the facts (the kernels, each GGUF type's block and kernel, the
  ``quantization=`` methods that are a kernel's format), in the standard library only: the
  kernel build writes them as the C header ``formats.h``, so C numbers them as Python does.
- :mod:`.registry`: each format bound to its kernel (:class:`~.registry.WeightFormat`), asked
  by the GGUF loader, the native layers, the quantized models and the fused decode step.
- one module a kernel (:mod:`.w4a8`, :mod:`.q8`, :mod:`.kq`, :mod:`.mxfp4`), beside its C
  file ``kernels/cpu/<name>.c``, ending in its ``KERNEL`` (:class:`~.kernel.Kernel`).

A new GGUF type read by a kernel that exists touches three code files: its entry in
``table.py``, its reader in the kernel's module and its unpacking in the kernel's C file. A
new type with a new kernel: ``table.py``, ``kernels/cpu/<kernel>.c`` and
``weights/<kernel>.py``; every layer and the loader then run it. For the fused decode step to
multiply it inside a layer too, ``fused_linear.h`` includes the C file and calls it in
``part_tiles`` (until then a layer holding it runs through the modules).
"""
