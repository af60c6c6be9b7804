"""A step's model inputs, with the image embeddings of the requests in flight: each image is
encoded once, when a step first reaches its placeholders, and dropped once they are all
computed or its request ends.

A chunked prefill that splits an image's placeholders reads its rows from here in each
chunk. A request preempted mid-image keeps them; one whose images were already dropped
and that is recomputed (past what the prefix cache still holds) encodes them again.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request
from llmkit.model.batch import SeqInput


class EncoderCache:
    def __init__(self, encode: Callable[[torch.Tensor], torch.Tensor]):
        self._encode = encode  # [images, C, H, W] -> [images, tokens, hidden]
        self._embeds: dict[tuple[Request, int], torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self._embeds)

    def seq_inputs(
        self, requests: list[Request], counts: list[int], allocator: BlockAllocator
    ) -> list[SeqInput]:
        """The runner's input for each request computing its next ``count`` tokens."""
        chunks = [(r, r.num_computed_tokens, n) for r, n in zip(requests, counts)]
        return [
            SeqInput(
                r.tokens(s, s + n),
                s,
                allocator.block_ids(r),
                images,
                group_block_ids=allocator.group_block_ids(r),
                state=allocator.state_ops(r),
            )
            for (r, s, n), images in zip(chunks, self.step_rows(chunks))
        ]

    def step_rows(
        self, chunks: list[tuple[Request, int, int]]
    ) -> list[list[tuple[int, torch.Tensor]]]:
        """For each (request, start, count) of a step, the (offset into the chunk, embedding
        rows) of the placeholders it covers. Every image missing here is encoded in one call."""
        missing = [
            (req, i)
            for req, start, n in chunks
            for i, image in enumerate(req.images)
            if image.offset < start + n
            and start < image.offset + image.length
            and (req, i) not in self._embeds
        ]
        if missing:
            pixels = torch.stack([req.images[i].pixel_values for req, i in missing])
            for key, embeds in zip(missing, self._encode(pixels)):
                self._embeds[key] = embeds
        rows = []
        for req, start, n in chunks:
            mine = []
            end = start + n
            for i, image in enumerate(req.images):
                lo, hi = max(start, image.offset), min(end, image.offset + image.length)
                if lo >= hi:
                    continue
                embeds = self._embeds[(req, i)]
                mine.append((lo - start, embeds[lo - image.offset : hi - image.offset]))
                if image.offset + image.length <= end:
                    del self._embeds[(req, i)]  # this step computes its last rows
            rows.append(mine)
        return rows

    def free(self, req: Request) -> None:
        for i in range(len(req.images)):
            self._embeds.pop((req, i), None)
