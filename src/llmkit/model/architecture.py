"""What the architecture registry (:mod:`llmkit.model.registry`) holds of each architecture:
its class and the names and facts each source (HF configs, GGUF files, the demo builder) gives
it. Torch-free: a model class is imported only when it is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from llmkit.model.gguf import families

Kind = Literal["decoder", "encoder", "vision-language"]
# (a reader of the file's ``{arch}.<key>`` metadata, with a default; the file's tensors by
# name, the gguf package's; the config's fields so far) -> None, filling in the fields.
GGUFConfig = Callable[[families.Key, Mapping[str, Any], dict[str, Any]], None]


@dataclass(frozen=True)
class Architecture:
    """One architecture: our class, and the names each source gives it.

    ``name`` is HF's ``architectures`` entry and our class's name in
    ``llmkit.model.models.<module>``. A ``decoder`` is a causal LM of the Llama family: the
    demo builder makes one, and LLaVA takes it as its language model.
    """

    name: str
    model_type: str  # HF's model_type: a config.json without architectures, ModelSpec's
    module: str
    config_class: str  # transformers' config class, which the demo builder and GGUF fill in
    kind: Kind = "decoder"
    gguf: str | None = None  # llama.cpp's general.architecture, where its GGUF files load
    # Config fields every config we write for it sets (demo folders, GGUF files' configs).
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # HF config field -> the GGUF metadata key (less ``{arch}.``) it is read from, beside the
    # keys every decoder has; and GGUF tensor name pieces -> HF modules where this family's
    # differ from llama.cpp's common ones (model/gguf/weights.py).
    gguf_keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    gguf_tensors: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # llama.cpp's converter permutes this family's q/k rows into its RoPE order (Llama's).
    gguf_permutes_qk: bool = False
    # Rope parameters this family's files imply but do not store.
    gguf_rope: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # Where a family's GGUF metadata needs more than keys copied to fields (Gemma's layer
    # pattern and rope table per layer type): fills the config's fields from the metadata.
    gguf_config: GGUFConfig | None = None
    # Tensors of the family's files that are facts its gguf_config reads, not weights (Gemma
    # 4's rope_freqs: which dimensions its global layers rotate).
    gguf_reads: tuple[str, ...] = ()
    # What llama.cpp's converter added to every norm weight (Gemma 3's ``1 + w`` norms),
    # taken off again as the file's tensors are read, so that they are the checkpoint's.
    gguf_norm_shift: float = 0.0
    gguf_unshifted: tuple[str, ...] = ()  # norms (name endings) the converter left alone
    # Config fields of the demo builder's tiny models only (small expert counts, windows
    # shorter than the tests' prompts), beside the ModelSpec's shape.
    demo: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def model_class(self) -> type[Any]:
        """Our ``nn.Module`` class, imported now (it needs torch)."""
        return getattr(importlib.import_module(f"llmkit.model.models.{self.module}"), self.name)
