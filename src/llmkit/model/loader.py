"""HF model directory -> one of our native modules: config by AutoConfig, weights by safetensors
(or, for a GGUF file's cached folder, from the file it names)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Set
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from safetensors import safe_open
from torch import nn

from llmkit.model import registry
from llmkit.model.context import ForwardContext
from llmkit.model.gguf.cache import gguf_table
from llmkit.model.gguf.config import read_whole
from llmkit.model.gguf.native import NativeWeights
from llmkit.model.gguf.weights import iter_gguf_weights
from llmkit.model.names import resolve_model, resolve_tokenizer
from llmkit.model.parallel import SINGLE, TensorParallel
from llmkit.model.weights import Weight

if TYPE_CHECKING:
    from transformers import PretrainedConfig


class NativeModel(Protocol):
    """What loading and the runner use of a native model (an ``nn.Module``).

    Decoders also have ``compute_logits``; an encoder (``is_encoder = True``) does not.
    """

    num_layers: int
    # A decoder's KV caches, (KV heads, head dim) each (an encoder keeps none).
    kv_cache_shapes: list[tuple[int, int]]

    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel = SINGLE) -> None:
        """``tp`` only where the class has ``supports_tensor_parallel = True``."""

    # A multimodal model also takes ``image_rows`` (see ModelRunner.execute).
    def __call__(
        self, input_ids: torch.Tensor, ctx: ForwardContext, **kwargs: Any
    ) -> torch.Tensor: ...

    def load_weights(self, weights: Iterable[tuple[str, Weight]]) -> None: ...

    def eval(self) -> NativeModel: ...


__all__ = [
    "check_tensor_parallel",
    "load_hf_config",
    "load_model",
    "model_class",
    "resolve_model",
    "resolve_tokenizer",
]


def load_hf_config(path: str) -> PretrainedConfig:
    """The model folder's config: a GGUF file's as its cached folder keeps it whole, else
    transformers' class for the folder's ``config.json``."""
    whole = read_whole(path)
    if whole is not None:
        return whole
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(path)


def model_class(hf_config: PretrainedConfig) -> type[NativeModel]:
    """Our class for the config's ``architectures``, or for its ``model_type`` where it has
    none (transformers' GGUF conversion writes such a config)."""
    names = list(getattr(hf_config, "architectures", None) or [])
    entries = [registry.by_name(name) for name in names]
    if not names:
        entries = [registry.by_model_type(str(getattr(hf_config, "model_type", None)))]
    for entry in entries:
        if entry is not None:
            return cast("type[NativeModel]", entry.model_class())
    raise ValueError(
        f"unsupported model architecture {', '.join(names) or '(none given)'}; "
        f"llmkit supports {', '.join(registry.names())}"
    )


def load_model(
    path: str,
    hf_config: PretrainedConfig,
    dtype: torch.dtype,
    device: torch.device,
    tp: TensorParallel = SINGLE,
    native: NativeWeights | None = None,
) -> NativeModel:
    """The model, or with ``tp`` this rank's shard of it, which reads only its slices.

    ``native``: a GGUF file's tensors that load as they are, put in place before the rest
    is read. The float layers they replace are never filled (the model's layers skip
    initialization: every weight comes from the checkpoint), so they cost no memory."""
    cls = model_class(hf_config)
    check_tensor_parallel(cls, tp.size)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(hf_config, tp) if tp.size > 1 else cls(hf_config)
    finally:
        torch.set_default_dtype(previous)
    native = native or NativeWeights()
    replaced = native.install(cast(nn.Module, model))
    model.load_weights(iter_weights(path, lazy=tp.size > 1, skip=native.tensors))
    del replaced  # their weight loaders were needed until here
    return model.eval()


def check_tensor_parallel(cls: type[NativeModel], size: int) -> None:
    """``ValueError`` unless ``cls`` can be sharded over ``size`` ranks."""
    if size > 1 and not _shardable(cls):
        raise ValueError(
            f"{cls.__name__} cannot be sharded: tensor_parallel_size > 1 supports "
            + ", ".join(
                sorted(a.name for a in registry.ARCHITECTURES if _shardable(a.model_class()))
            )
        )


def _shardable(cls: type[NativeModel]) -> bool:
    return bool(getattr(cls, "supports_tensor_parallel", False))


def iter_weights(
    path: str, lazy: bool = False, skip: Set[str] = frozenset()
) -> Iterator[tuple[str, Weight]]:
    """Every tensor of a checkpoint, sharded (``model.safetensors.index.json``) or not.

    ``lazy``: safetensors slices instead, which read from disk only what is indexed.
    ``skip``: a GGUF file's tensors (by their names in the file) not to read."""
    table = gguf_table(path)
    if table is not None:
        yield from iter_gguf_weights(table, skip)
        return
    root = Path(path)
    index = root / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = sorted(p.name for p in root.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no *.safetensors weights found in {path}")
    for name in files:
        with safe_open(str(root / name), framework="pt") as f:
            for key in f.keys():  # noqa: SIM118 (a safetensors handle is not iterable)
                yield key, f.get_slice(key) if lazy else f.get_tensor(key)
