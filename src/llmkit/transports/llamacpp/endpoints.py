"""llama-server's native endpoints that editors call, each declared once
(transports/endpoints.py): /infill, code completion with the repository's files."""

from __future__ import annotations

from llmkit.protocol.llamacpp import InfillChunk, InfillRequest, InfillResponse
from llmkit.protocol.openai import ErrorResponse
from llmkit.transports.endpoints import Api, Endpoint
from llmkit.transports.openai.endpoints import ERRORS

_ENDPOINTS = (
    Endpoint("/infill", "POST", "infill",
             "Fill in the middle: the code between a prefix and a suffix (llama.vim, "
             "llama.vscode).", InfillRequest, InfillResponse, "sse",
             (400, 404, 503), "generate", InfillChunk, capability="insert",
             events="Each piece of the completion, then the answer (stop: true, content "
             "empty); no [DONE]."),
)  # fmt: skip
LLAMACPP = Api(
    "llama.cpp",
    _ENDPOINTS,
    {**ERRORS, 400: "The request is invalid, or the model has no FIM tokens (the message "
                    "names them)."},
    ErrorResponse,
)  # fmt: skip
