"""Opening a GGUF file with llama.cpp's own reader (the ``gguf`` package), failing clearly."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gguf import GGUFReader

MAGIC = b"GGUF"


def open_gguf(path: str | Path) -> GGUFReader:
    """The file's reader; ``ValueError`` naming the file if it is missing, not GGUF or cut short."""
    from gguf import GGUFReader

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {str(path)!r}")
    with path.open("rb") as f:
        if f.read(4) != MAGIC:
            raise ValueError(f"{path}: not a GGUF file (it does not start with {MAGIC!r})")
    try:
        reader = GGUFReader(path)
    except Exception as e:  # noqa: BLE001 (the reader fails with whatever numpy raised)
        raise ValueError(f"{path}: unreadable GGUF file (truncated or corrupt?): {e}") from None
    # The reader maps tensors lazily: one that runs past the end means the file was cut short.
    size = path.stat().st_size
    for tensor in reader.tensors:
        if tensor.data_offset + tensor.n_bytes > size:
            raise ValueError(
                f"{path}: truncated GGUF file: tensor {tensor.name} ends at byte "
                f"{tensor.data_offset + tensor.n_bytes}, the file has {size}"
            )
    return reader


def field(reader: GGUFReader, key: str, default: Any = None) -> Any:
    """The metadata value at ``key`` (a number, string or list), or ``default``."""
    entry = reader.fields.get(key)
    return default if entry is None else entry.contents()
