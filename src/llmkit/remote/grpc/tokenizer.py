"""GetTokenizer: the engine's tokenizer files as one zip, in 64 KiB chunks with its sha256 on
the last, so a gateway tokenizes exactly as the engine does."""

from __future__ import annotations

import hashlib
import io
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from llmkit.engine.core.tokenizer import Tokenizer

CHUNK_BYTES = 64 * 1024
# Model files a gateway reads beside the tokenizer's own (eos ids, context length).
_MODEL_FILES = ("config.json", "generation_config.json")


def tokenizer_zip(tokenizer: Tokenizer, model_dir: str) -> bytes:
    """The tokenizer as the engine loaded it (an HF folder's, or one built from a GGUF file),
    saved by transformers with its chat template, plus the model's config files."""
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.hf.save_pretrained(tmp)
        source = Path(model_dir)
        for name in _MODEL_FILES:
            if (source / name).is_file():
                shutil.copy(source / name, Path(tmp) / name)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(Path(tmp).iterdir()):
                if path.is_file():
                    archive.write(path, path.name)
        return buffer.getvalue()


def chunks(data: bytes) -> Iterator[tuple[bytes, str]]:
    """(bytes, sha256) pairs: the sha256 hex of the whole zip on the last, empty before."""
    digest = hashlib.sha256(data).hexdigest()
    starts = range(0, len(data), CHUNK_BYTES) if data else range(1)
    last = starts[-1]
    for start in starts:
        yield data[start : start + CHUNK_BYTES], digest if start == last else ""
