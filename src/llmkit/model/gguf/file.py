"""Opening a GGUF file with llama.cpp's own reader (the ``gguf`` package), failing clearly."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gguf import GGUFReader

MAGIC = b"GGUF"


def open_gguf(path: str | Path) -> GGUFReader:
    """The file's reader; ``ValueError`` naming the file if it is missing, not GGUF or cut short."""

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {str(path)!r}")
    with path.open("rb") as f:
        if f.read(4) != MAGIC:
            raise ValueError(f"{path}: not a GGUF file (it does not start with {MAGIC!r})")
    try:
        reader = _checked_reader()(path)
    except Exception as e:  # noqa: BLE001 (the reader fails with whatever numpy raised)
        raise ValueError(f"{path}: unreadable GGUF file (truncated or corrupt?): {e}") from None
    return reader


def _checked_reader() -> type[GGUFReader]:
    """The gguf package's reader, checking that each tensor lies inside the file before it
    maps it (its own mapping fails with a bare numpy reshape error that names none)."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader

    class Checked(GGUFReader):
        def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
            for tensor in fields:
                _, name, _, dims, raw_type, offset = tensor.parts
                block, size = GGML_QUANT_SIZES[GGMLQuantizationType(raw_type[0])]
                end = int(start_offs + offset[0]) + int(np.prod(dims)) * size // block
                if end > len(self.data):
                    raise ValueError(
                        f"tensor {bytes(name).decode(errors='replace')} ends at byte {end}, "
                        f"the file has {len(self.data)}"
                    )
            super()._build_tensors(start_offs, fields)

    return Checked


def field(reader: GGUFReader, key: str, default: Any = None) -> Any:
    """The metadata value at ``key`` (a number, string or list), or ``default``."""
    entry = reader.fields.get(key)
    return default if entry is None else entry.contents()
