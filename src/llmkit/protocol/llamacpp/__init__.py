"""llama-server's native API where editors use it: /infill (code completion)."""

from llmkit.protocol.llamacpp.infill import (
    ExtraChunk,
    InfillChunk,
    InfillRequest,
    InfillResponse,
    InfillTimings,
)

__all__ = ["ExtraChunk", "InfillChunk", "InfillRequest", "InfillResponse", "InfillTimings"]
