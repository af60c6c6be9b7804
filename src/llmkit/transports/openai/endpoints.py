"""The OpenAI API's endpoints (and vLLM's beside them), each declared once
(transports/endpoints.py), and what its errors mean."""

from __future__ import annotations

from llmkit.protocol.openai import (
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionChunk,
    CompletionRequest,
    CompletionResponse,
    DetokenizeRequest,
    DetokenizeResponse,
    EmbeddingRequest,
    EmbeddingResponse,
    ErrorResponse,
    LoadLoRAAdapterRequest,
    ModelCard,
    ModelList,
    RerankRequest,
    RerankResponse,
    ScoreRequest,
    ScoreResponse,
    TokenizeRequest,
    TokenizeResponse,
    UnloadLoRAAdapterRequest,
)
from llmkit.protocol.openai.responses import (
    DeletedResponse,
    ResponseEvent,
    ResponseObject,
    ResponsesRequest,
)
from llmkit.transports.endpoints import Api, Endpoint

ERRORS = {
    400: "The request is invalid (the message names the parameter).",
    404: "The model does not exist.",
    503: "The server is overloaded (code `overloaded`, retry after Retry-After) or draining.",
}
_MODEL_ERRORS = (400, 404, 503)
_STORED = "/v1/responses/{response_id}"
_NO_RESPONSE = ((404, "No stored response has this id."),)
_SCORE = "Score text pairs (cosine of embeddings)."
_RERANK = "Rank documents against a query."
# vLLM's, Jina's and Cohere's paths of one rerank endpoint.
_RERANK_PATHS = ("/rerank", "/v1/rerank", "/v2/rerank")

_ENDPOINTS = (
    Endpoint("/v1/completions", "POST", "completions", "Complete a prompt.", CompletionRequest,
             CompletionResponse, "sse", _MODEL_ERRORS, "generate", CompletionChunk, batch=True),
    Endpoint("/v1/chat/completions", "POST", "chat_completions", "Answer a conversation.",
             ChatCompletionRequest, ChatCompletionResponse, "sse", _MODEL_ERRORS, "generate",
             ChatCompletionChunk, batch=True),
    Endpoint("/v1/responses", "POST", "responses", "Respond to input items (the Responses API).",
             ResponsesRequest, ResponseObject, "sse", _MODEL_ERRORS, "generate", ResponseEvent,
             batch=True),
    Endpoint(_STORED, "GET", "response", "A stored response.", response=ResponseObject,
             errors=(404,), task="generate", notes=_NO_RESPONSE),
    Endpoint(_STORED, "DELETE", "response", "Delete a stored response.",
             response=DeletedResponse, errors=(404,), task="generate", notes=_NO_RESPONSE),
    Endpoint(_STORED + "/cancel", "POST", "response",
             "Cancel a background response (none run here).", errors=(400, 404),
             task="generate", notes=_NO_RESPONSE, refuses=True),
    Endpoint("/v1/embeddings", "POST", "embeddings", "Embed inputs.", EmbeddingRequest,
             EmbeddingResponse, errors=_MODEL_ERRORS, task="embed", batch=True),
    *(Endpoint(path, "POST", "score", _SCORE, ScoreRequest, ScoreResponse, errors=_MODEL_ERRORS,
               task="embed", batch=True) for path in ("/score", "/v1/score")),
    *(Endpoint(path, "POST", "rerank", _RERANK, RerankRequest, RerankResponse,
               errors=_MODEL_ERRORS, task="embed", batch=True) for path in _RERANK_PATHS),
    Endpoint("/tokenize", "POST", "tokenize", "Tokenize a prompt or messages.", TokenizeRequest,
             TokenizeResponse, errors=_MODEL_ERRORS),
    Endpoint("/detokenize", "POST", "detokenize", "Detokenize token ids.", DetokenizeRequest,
             DetokenizeResponse, errors=_MODEL_ERRORS),
    Endpoint("/v1/models", "GET", "models", "The served model names.", response=ModelList),
    Endpoint("/v1/models/{model:path}", "GET", "model", "One served model.", response=ModelCard,
             errors=(404,)),
)  # fmt: skip
OPENAI = Api("openai", _ENDPOINTS, ERRORS, ErrorResponse)

# vLLM's runtime LoRA updates, served with --enable-lora-runtime-updates only.
_LORA_ENDPOINTS = (
    Endpoint("/v1/load_lora_adapter", "POST", "load_lora_adapter", "Load a LoRA adapter.",
             LoadLoRAAdapterRequest, "text", errors=_MODEL_ERRORS, ok="Done."),
    Endpoint("/v1/unload_lora_adapter", "POST", "unload_lora_adapter", "Unload a LoRA adapter.",
             UnloadLoRAAdapterRequest, "text", errors=_MODEL_ERRORS, ok="Done."),
)  # fmt: skip
LORA_UPDATES = Api("lora_updates", _LORA_ENDPOINTS, ERRORS, ErrorResponse)
