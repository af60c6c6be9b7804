"""A model's own pooling defaults, read once at load from its sentence-transformers files.

A sentence-transformers directory names its modules in ``modules.json``: the Pooling
module's ``config.json`` says how tokens become one vector, a Normalize module says the
vector is L2-normalized, and ``sentence_bert_config.json`` caps the input length. No torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# sentence-transformers' pooling mode -> ours; max and the weighted means have no pooler here.
_ST_MODES = {"cls": "cls", "mean": "mean", "lasttoken": "last"}
# The boolean keys that configs written before sentence-transformers 5 use.
_ST_LEGACY_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_ST_POOLING = "sentence_transformers.models.Pooling"
_ST_NORMALIZE = "sentence_transformers.models.Normalize"


@dataclass(frozen=True)
class PoolingConfig:
    """What a pooling request gets when its ``PoolingParams`` leave a field as None."""

    pooling_type: str  # "last", "mean" or "cls"
    normalize: bool
    # sentence-transformers' max_seq_length: the longest input the model was meant for.
    max_seq_length: int | None = None


def resolve_pooling_config(path: str | Path, default_pooling_type: str) -> PoolingConfig:
    """The model's pooling: its sentence-transformers modules if present, else the class default.

    Without sentence-transformers files an embedding is normalized, as vLLM does; with them,
    only when the pipeline has a Normalize module, so results match the library.
    """
    root = Path(path)
    modules = _read_json(root / "modules.json")
    max_seq_length = _read_json(root / "sentence_bert_config.json").get("max_seq_length")
    if not isinstance(modules, list) or not modules:
        return PoolingConfig(default_pooling_type, True, max_seq_length)
    pooling_type = default_pooling_type
    normalize = False
    for module in modules:
        kind = _module_type(module.get("type", ""))
        if kind == _ST_POOLING:
            config = _read_json(root / module.get("path", "") / "config.json")
            pooling_type = _st_pooling_type(config)
        elif kind == _ST_NORMALIZE:
            normalize = True
    return PoolingConfig(pooling_type, normalize, max_seq_length)


def _module_type(name: str) -> str:
    # sentence-transformers 5+ writes module paths under new packages; the class name is stable.
    if name.endswith(".Pooling"):
        return _ST_POOLING
    if name.endswith(".Normalize"):
        return _ST_NORMALIZE
    return name


def _st_pooling_type(config: dict[str, Any]) -> str:
    mode = config.get("pooling_mode")
    if mode is None:
        modes = [m for key, m in _ST_LEGACY_KEYS.items() if config.get(key)]
        mode = modes if len(modes) != 1 else modes[0]
        if not modes:
            mode = "mean"  # sentence-transformers' own default
    if isinstance(mode, list) and len(mode) == 1:
        mode = mode[0]
    if not isinstance(mode, str) or mode not in _ST_MODES:
        raise ValueError(
            f"sentence-transformers pooling mode {mode!r} is not supported; "
            f"llmkit pools with {', '.join(_ST_MODES)}"
        )
    return _ST_MODES[mode]


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return {}
    return json.loads(path.read_text())
