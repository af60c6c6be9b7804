"""What a model file says of itself without loading it: architecture, context length,
parameters, quantization, chat template (for Ollama's /api/tags, /api/show and /api/ps)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmkit.engine.core.fim import REQUIRED, FimTokens
from llmkit.model.names import DEMO_MODEL_NAME, INSTALLED_GGUF, installed_gguf

# Architectures that embed rather than generate.
_ENCODERS = ("bert", "nomic-bert", "roberta", "xlm-roberta")
_DTYPE_LEVELS = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}
_DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2}


@dataclass(frozen=True)
class ModelFacts:
    path: str  # the file or folder
    format: str  # "gguf" or "safetensors"
    architecture: str
    context_length: int | None
    parameter_count: int
    quantization_level: str  # Ollama's names: Q4_1, Q8_0, F16, F32, ...
    chat_template: str
    size: int  # bytes on disk
    modified: float  # Unix seconds
    digest: str  # sha256 of the path, size and modification time (not of the bytes)
    # A mixture of experts' expert count and experts used a token; a windowed model's window.
    expert_count: int | None = None
    expert_used_count: int | None = None
    sliding_window: int | None = None
    infill: bool = False  # its vocabulary has the FIM tokens code completion needs

    @property
    def is_encoder(self) -> bool:
        return self.architecture in _ENCODERS

    @property
    def parameter_size(self) -> str:
        """Ollama's "135M", "7.2B"."""
        n = self.parameter_count
        if n >= 10**9:
            return f"{n / 10**9:.1f}B"
        return f"{n / 10**6:.0f}M" if n >= 10**6 else str(n)


def model_path(model: str) -> Path | None:
    """The file or folder a model name stands for; None for the built-in demo model."""
    if model == DEMO_MODEL_NAME:
        return None
    return installed_gguf(model) if model in INSTALLED_GGUF else Path(model)


@functools.cache
def read_facts(model: str) -> ModelFacts:
    """``model``'s facts, read once per process; ``ValueError`` if its file cannot be read."""
    path = model_path(model)
    if path is None:
        return ModelFacts(model, "safetensors", "llama", None, 0, "F32", "", 0, 0.0, "0" * 64)
    try:
        stat = path.stat()
        size = stat.st_size if path.is_file() else _folder_size(path)
        facts: dict[str, Any] = _gguf(path) if path.is_file() else _hf_folder(path, size)
    except Exception as exc:  # noqa: BLE001 - a broken file: its own requests say why
        raise ValueError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    key = f"{path.resolve()}:{size}:{stat.st_mtime}".encode()
    return ModelFacts(
        str(path),
        size=size,
        modified=stat.st_mtime,
        digest=hashlib.sha256(key).hexdigest(),
        **facts,
    )


def _folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def _gguf(path: Path) -> dict[str, Any]:
    import gguf

    reader = gguf.GGUFReader(str(path))

    def field(name: str) -> Any:
        value = reader.fields.get(name)
        return None if value is None else value.contents()

    arch = str(field("general.architecture") or "unknown")
    file_type = field("general.file_type")
    level = "unknown"
    if file_type is not None:
        level = gguf.LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_").replace("ALL_", "")
    return {
        "format": "gguf",
        "architecture": arch,
        "context_length": field(f"{arch}.context_length"),
        "parameter_count": sum(int(t.n_elements) for t in reader.tensors),
        "quantization_level": level,
        "chat_template": str(field("tokenizer.chat_template") or ""),
        "expert_count": field(f"{arch}.expert_count"),
        "expert_used_count": field(f"{arch}.expert_used_count"),
        "sliding_window": field(f"{arch}.attention.sliding_window"),
        "infill": all(field(f"tokenizer.ggml.{n}_token_id") is not None for n in REQUIRED)
        or not FimTokens.among(field("tokenizer.ggml.tokens") or ()).missing,
    }


def _hf_folder(path: Path, size: int) -> dict[str, Any]:
    config = json.loads((path / "config.json").read_text())
    level = _DTYPE_LEVELS.get(str(config.get("torch_dtype", "float32")), "F32")
    template = ""
    tokenizer_config = path / "tokenizer_config.json"
    if tokenizer_config.is_file():
        template = str(json.loads(tokenizer_config.read_text()).get("chat_template") or "")
    if not template and (path / "chat_template.jinja").is_file():  # transformers' newer place
        template = (path / "chat_template.jinja").read_text()
    weights = sum(p.stat().st_size for p in path.glob("*.safetensors"))
    experts = config.get("num_experts") or config.get("num_local_experts")
    windowed = "sliding_attention" in (config.get("layer_types") or [])
    return {
        "format": "safetensors",
        "architecture": str(config.get("model_type", "unknown")),
        "context_length": config.get("max_position_embeddings"),
        "parameter_count": (weights or size) // _DTYPE_BYTES[level],
        "quantization_level": level,
        "chat_template": template,
        "expert_count": experts,
        "expert_used_count": config.get("num_experts_per_tok") if experts else None,
        "sliding_window": config.get("sliding_window") if windowed else None,
        "infill": not FimTokens.among(_added_tokens(path)).missing,
    }


def _added_tokens(path: Path) -> list[str]:
    """The texts of a tokenizer's added (special) tokens, where FIM tokens are."""
    texts = []
    for name, key in (("tokenizer.json", "added_tokens"), ("tokenizer_config.json", None)):
        file = path / name
        if file.is_file():
            data = json.loads(file.read_text())
            tokens = data.get(key) if key else list(data.get("added_tokens_decoder", {}).values())
            texts += [t.get("content", "") for t in tokens or []]
    return texts
