"""A GGUF file -> a cached HF-style folder (config, tokenizer, chat template) naming the file.

The engine keeps treating every model as a folder; the folder's tensor table
(:mod:`llmkit.model.gguf.tensors`) names the file the weights are read from. Building the
tokenizer from the file's vocabulary and parsing its metadata take seconds, so the folder is
built once, under a key of the file's path, size and leading bytes.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

from llmkit.model.demo import build_once
from llmkit.model.gguf.tensors import FILE, TensorTable

logger = logging.getLogger(__name__)
_FORMAT_VERSION = 4  # 3: the tensor table names the file's architecture; 4: the whole config
# The metadata (vocabulary, merges, chat template) sits at the file's start: 1.7 MiB for a
# 49k vocabulary, a few MiB for the largest. Hashing this much covers it at a few ms,
# where hashing a multi-GB file on every start would take seconds.
_KEY_BYTES = 16 << 20


def cache_key(path: Path) -> str:
    """What the folder depends on: the file's place, size and leading bytes (its metadata)."""
    digest = hashlib.sha256(f"{_FORMAT_VERSION}\0{path}\0{path.stat().st_size}\0".encode())
    with path.open("rb") as f:
        digest.update(f.read(_KEY_BYTES))
    return digest.hexdigest()[:32]


def resolve_gguf(file: str | Path, cache_dir: Path) -> str:
    """The cached folder for GGUF ``file``, built on first use; ``ValueError`` if unusable."""
    path = Path(file).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {str(file)!r}")
    folder = cache_dir / "gguf" / cache_key(path)
    return str(
        build_once(
            folder, {"gguf": str(path), "format": _FORMAT_VERSION}, lambda tmp: _write(path, tmp)
        )
    )


def gguf_table(folder: str | Path) -> TensorTable | None:
    """The tensor table of the GGUF file a cached folder was built from, or None for an
    ordinary model folder."""
    if not (Path(folder) / FILE).is_file():
        return None
    return TensorTable.load(Path(folder))


def _tokenizer_class(config: Any) -> Any:
    """The class AutoTokenizer picks for ``config``'s model type, named directly: given a GGUF
    file, AutoTokenizer parses the whole file again for a config (~5 s for a 49k vocabulary)."""
    try:
        from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING
        from transformers.tokenization_utils_tokenizers import TokenizersBackend

        return TOKENIZER_MAPPING.get(type(config), None) or TokenizersBackend
    except ImportError:  # another transformers: its own way, slower
        from transformers import AutoTokenizer

        return AutoTokenizer


def _write(path: Path, tmp: Path) -> None:
    from llmkit.model.gguf.config import hf_config, save_whole
    from llmkit.model.gguf.file import open_gguf
    from llmkit.model.gguf.weights import check_tensors

    logger.info("reading %s's metadata, tokenizer and tensor table (once, into %s)", path, tmp)
    reader = open_gguf(path)
    config = hf_config(reader, path)
    table = TensorTable.of(reader, path)
    check_tensors(table)  # a type it cannot read fails now, not after the engine starts
    config.save_pretrained(tmp)
    save_whole(config, tmp)
    try:
        # transformers' GGUF tokenizer: the vocabulary, merges, pre-tokenizer split, special
        # tokens, bos/eos/pad and chat template, as its from_pretrained(gguf_file=) builds it.
        tokenizer = _tokenizer_class(config).from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as e:  # noqa: BLE001 (whatever the converter raised, said with the file)
        raise ValueError(f"{path}: cannot build a tokenizer from the GGUF metadata: {e}") from None
    tokenizer.save_pretrained(tmp)
    table.save(tmp)
