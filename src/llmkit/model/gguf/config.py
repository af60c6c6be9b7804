"""A GGUF file's metadata (``{arch}.*`` keys) -> a transformers config: the keys every decoder
has here, a family's own as its registry entry names them. Kept in the file's cached folder
whole (:func:`save_whole`), so that a start reads it back without transformers' family
classes (:func:`read_whole`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmkit.model import registry
from llmkit.model.gguf.file import field

if TYPE_CHECKING:
    from gguf import GGUFReader
    from transformers import PretrainedConfig


WHOLE_CONFIG = "llmkit_config.json"  # every attribute of the family's config, as set


def save_whole(config: PretrainedConfig, folder: Path) -> None:
    """``config``'s every attribute as its family's class sets it (defaults, derived values,
    the names its ``attribute_map`` aliases) into ``folder``, for :func:`read_whole`. Not for
    a config of sub-configs (a vision model's), which only its class rebuilds."""
    if getattr(config, "sub_configs", None):
        return
    values = config.to_dict()
    for alias, name in getattr(config, "attribute_map", {}).items():
        values.setdefault(alias, values.get(name))
    (folder / WHOLE_CONFIG).write_text(json.dumps(values))


def read_whole(folder: str | Path) -> PretrainedConfig | None:
    """The config :func:`save_whole` kept in ``folder``, as transformers' base class holding
    every attribute; None where it kept none. A family's class would import transformers'
    model-loading stack (its field validators pull in ``torch.distributed.tensor`` and
    sympy): 2.5-3 s of a start on two cores, which this takes in milliseconds."""
    path = Path(folder) / WHOLE_CONFIG
    if not path.is_file():
        return None
    from transformers.configuration_utils import PretrainedConfig

    return PretrainedConfig(**json.loads(path.read_text()))


def architecture(reader: GGUFReader, path: str | Path) -> str:
    """``general.architecture``; ``ValueError`` if llmkit has no model for it."""
    arch = field(reader, "general.architecture")
    if registry.by_gguf(str(arch)) is None:
        raise ValueError(
            f"{path}: GGUF architecture {arch or '(none given)'!r} is not supported; "
            f"llmkit reads {', '.join(registry.gguf_names())}"
        )
    return str(arch)


def hf_config(reader: GGUFReader, path: str | Path) -> PretrainedConfig:
    """The config transformers would write for this model, with ``architectures`` set."""
    import transformers

    arch = architecture(reader, path)
    entry = registry.by_gguf(arch)
    assert entry is not None  # architecture() checked it

    def key(name: str, default: Any = None) -> Any:
        value = field(reader, f"{arch}.{name}", default)
        if value is None:
            raise ValueError(f"{path}: GGUF metadata lacks {arch}.{name}")
        return value

    tensors = {t.name: t for t in reader.tensors}
    if "rope_freqs.weight" in tensors and "rope_freqs.weight" not in entry.gguf_reads:
        raise ValueError(
            f"{path}: the file carries a per-dimension RoPE frequency table (rope_freqs, "
            "Llama 3.1-style rope scaling), which llmkit cannot apply yet"
        )
    if "token_embd.weight" not in tensors:
        raise ValueError(f"{path}: GGUF file has no token_embd.weight tensor")
    heads = int(key("attention.head_count"))
    hidden = int(key("embedding_length"))
    kwargs: dict[str, Any] = dict(
        architectures=[entry.name],
        # ggml lists dimensions innermost first: token_embd is [hidden, vocab].
        vocab_size=int(tensors["token_embd.weight"].shape[-1]),
        hidden_size=hidden,
        # A value per layer (Gemma 4's): the first here, the family's gguf_config reads all.
        # (A mixture of experts with no dense layer may have none: Qwen3.5-MoE's files.)
        intermediate_size=int(_first(key("feed_forward_length", 0))),
        num_hidden_layers=int(key("block_count")),
        num_attention_heads=heads,
        num_key_value_heads=int(_first(key("attention.head_count_kv", heads))),
        head_dim=int(key("attention.key_length", hidden // heads)),
        max_position_embeddings=int(key("context_length")),
        rms_norm_eps=float(key("attention.layer_norm_rms_epsilon")),
        rope_parameters=_rope(reader, arch, path, entry.gguf_rope),
        tie_word_embeddings="output.weight" not in tensors,
        bos_token_id=field(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=field(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=field(reader, "tokenizer.ggml.padding_token_id"),
    )
    kwargs.update({name: key(gguf_key) for name, gguf_key in entry.gguf_keys.items()})
    kwargs.update(entry.config)
    if entry.gguf_config is not None:
        entry.gguf_config(key, tensors, kwargs)
    dense = [i for i in range(kwargs["num_hidden_layers"]) if f"blk.{i}.ffn_gate.weight" in tensors]
    if "num_experts" in entry.gguf_keys and dense:  # a mixture of experts with dense layers
        kwargs["mlp_only_layers"] = dense
    # HF's attention_bias puts a bias on q, k, v and o (Llama's, gpt-oss's); Qwen2's q/k/v
    # biases alone come with its class, and its file has none on o.
    kwargs["attention_bias"] = "blk.0.attn_output.bias" in tensors
    return getattr(transformers, entry.config_class)(**kwargs)


def _first(value: Any) -> Any:
    """A metadata value that may be given per layer: the first layer's."""
    return value[0] if isinstance(value, list) else value


def _rope(
    reader: GGUFReader, arch: str, path: str | Path, implied: Mapping[str, Any]
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "rope_type": "default",
        "rope_theta": float(field(reader, f"{arch}.rope.freq_base", 10000.0)),
    }
    scaling = field(reader, f"{arch}.rope.scaling.type", "none")
    factor = field(reader, f"{arch}.rope.scaling.factor")
    if scaling == "none" or factor in (None, 1.0):
        return params
    if scaling == "linear":
        return {**params, "rope_type": "linear", "factor": float(factor)}
    if scaling == "yarn":
        original = field(reader, f"{arch}.rope.scaling.original_context_length")
        betas = {
            name: float(value)
            for name in ("beta_fast", "beta_slow")
            if (value := field(reader, f"{arch}.rope.scaling.yarn_{name}")) is not None
        }
        return {
            **params,
            "rope_type": "yarn",
            "factor": float(factor),
            "original_max_position_embeddings": int(original),
            **betas,
            **implied,
        }
    raise ValueError(f"{path}: GGUF rope scaling {scaling!r} is not supported")
