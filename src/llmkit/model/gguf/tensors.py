"""A GGUF file's tensor table (name, type, shape, where its bytes lie), kept beside the cache.

The gguf package's reader parses every metadata field before it reaches the tensor table:
~1.7 s for a 49k vocabulary's strings, on every start. The cached folder keeps the table the
reader found (``tensors.json``), so a load maps the file and slices each tensor's bytes
without parsing the metadata again. The bytes are read (and dequantized) by the gguf
package's own code.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gguf import GGMLQuantizationType, GGUFReader

FILE = "tensors.json"


@dataclass(frozen=True)
class TensorInfo:
    """One tensor: ``shape`` in torch's order (outermost first), ``offset`` into the file."""

    name: str
    type: str  # a GGMLQuantizationType name: F32, Q4_1, Q8_0, ...
    shape: tuple[int, ...]
    offset: int
    nbytes: int

    @property
    def qtype(self) -> GGMLQuantizationType:
        from gguf import GGMLQuantizationType

        return GGMLQuantizationType[self.type]


class TensorTable:
    """The tensors of ``file`` by name, their bytes mapped (not read) from the file.

    ``arch``: the file's ``general.architecture``; ``permuted``: the attention tensors
    (``attn_q``, ``attn_k``) whose rows llama.cpp's converter permuted, with their head
    counts (Llama-family files only)."""

    def __init__(
        self,
        file: Path,
        arch: str,
        tensors: list[TensorInfo],
        permuted: dict[str, int],
        folder: Path | None = None,
    ) -> None:
        self.file, self.folder = file, folder  # folder: the cached folder it was saved in
        self.arch = arch
        self.tensors = {t.name: t for t in tensors}
        self.permuted = permuted
        self._map: np.memmap | None = None

    @classmethod
    def of(cls, reader: GGUFReader, file: Path) -> TensorTable:
        """The table as the gguf package's reader found it."""
        from llmkit.model import registry
        from llmkit.model.gguf.config import architecture
        from llmkit.model.gguf.file import field

        permuted = {}
        arch = architecture(reader, file)
        entry = registry.by_gguf(arch)
        if entry is not None and entry.gguf_permutes_qk:
            heads = int(field(reader, "llama.attention.head_count"))
            permuted = {
                "attn_q": heads,
                "attn_k": int(field(reader, "llama.attention.head_count_kv", heads)),
            }
        return cls(
            file,
            arch,
            [
                TensorInfo(
                    t.name,
                    t.tensor_type.name,
                    tuple(int(d) for d in reversed(t.shape.tolist())),  # ggml's is innermost first
                    int(t.data_offset),
                    int(t.n_bytes),
                )
                for t in reader.tensors
            ],
            permuted,
        )

    def save(self, folder: Path) -> None:
        tensors = [asdict(t) for t in self.tensors.values()]
        table = {
            "file": str(self.file),
            "arch": self.arch,
            "permuted": self.permuted,
            "tensors": tensors,
        }
        (folder / FILE).write_text(json.dumps(table))

    @classmethod
    def load(cls, folder: Path) -> TensorTable:
        data = json.loads((folder / FILE).read_text())
        infos = [TensorInfo(**{**t, "shape": tuple(t["shape"])}) for t in data["tensors"]]
        return cls(Path(data["file"]), data["arch"], infos, data["permuted"], folder)

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as rows: uint8 ``[*shape[:-1], bytes of one row]``."""
        info = self.tensors[name]
        if self._map is None:
            self._map = np.memmap(self.file, dtype=np.uint8, mode="r")
        data = self._map[info.offset : info.offset + info.nbytes]
        if len(data) < info.nbytes:
            raise ValueError(
                f"GGUF file {self.file} is truncated: tensor {name} ({info.type}) holds "
                f"{len(data)} of its {info.nbytes} bytes"
            )
        outer = info.shape[:-1]
        return data.reshape(*outer, info.nbytes // max(1, int(np.prod(outer))))

    def heads(self, name: str) -> int | None:
        """The head count whose rows llama.cpp permuted in tensor ``name``, or None."""
        parts = name.split(".")
        return self.permuted.get(parts[2]) if len(parts) == 4 and parts[0] == "blk" else None

    def rows(self, name: str) -> np.ndarray:
        """:meth:`raw`, with llama.cpp's Q/K row permutation undone (rows are whole blocks)."""
        heads = self.heads(name)
        raw = self.raw(name)
        return raw if heads is None else unpermute(raw, heads)

    def dequantized(self, name: str) -> np.ndarray:
        """The tensor in float32, ``shape``, in HF's row order."""
        from gguf import dequantize

        info = self.tensors[name]
        return dequantize(self.rows(name), info.qtype).reshape(info.shape).astype(np.float32)


def unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's ``LlamaModel.permute``: each head's rows go back from interleaved
    rotary pairs (its kernel's order) to HF's two halves (``rotate_half``)."""
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)
