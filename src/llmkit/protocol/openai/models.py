"""/v1/models, /tokenize, /detokenize, /version and /load; llama-server's /models/load and
/models/unload."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SerializeAsAny

from llmkit.protocol.openai.chat import ChatMessage, ChatTemplate, TemplateKwargs
from llmkit.protocol.openai.common import Int64, JsonObject, RequestBody, WireModel, now_seconds


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=now_seconds)
    owned_by: str = "llmkit"
    root: str | None = None
    parent: str | None = None  # a LoRA adapter's base model
    max_model_len: int | None = None
    # What a prompt may hold, as OpenRouter's models list says it: "text", and "image" for
    # a vision model (the chat page offers image attachment from it).
    input_modalities: list[Literal["text", "image"]] = ["text"]
    # What the model is (its class), and for a mixture of experts or a windowed model, what
    # it is made of; absent where not known (a managed model not loaded).
    architecture: str | None = None
    num_experts: int | None = None
    num_experts_per_tok: int | None = None
    sliding_window: int | None = None
    # What it serves, in Ollama's names: "completion" (or "embedding"), "insert" where it
    # fills in the middle (code completion: suffix, /infill), "vision".
    capabilities: list[str] | None = None


class ManagedModelCard(ModelCard):
    """A model of a server of several (``llmkit serve --model NAME=PATH ...``), with its state:
    llama-server's router lists these; ``expires_at`` in Unix seconds, while loaded and idle."""

    state: Literal["unloaded", "loading", "loaded", "unloading"]
    expires_at: float | None = None
    resident_bytes: int  # estimated before loading; what the memory budget counts
    pinned: bool = False
    error: str | None = None  # why its last load failed


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    # A card of either kind, serialized with its own fields.
    data: list[SerializeAsAny[ModelCard]]


class TokenizeRequest(RequestBody):
    """vLLM's /tokenize body: either ``prompt`` or chat ``messages``."""

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = Field(default=None, min_length=1)
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template: ChatTemplate | None = None
    chat_template_kwargs: TemplateKwargs | None = None
    # As a chat request's: how the template shows these tools to the model.
    tools: list[JsonObject] | None = None
    return_token_strs: bool = False


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None = None


class DetokenizeRequest(RequestBody):
    model: str | None = None
    # Checked against the vocabulary, naming the bad id.
    tokens: list[Int64]


class DetokenizeResponse(BaseModel):
    prompt: str


class LoadLoRAAdapterRequest(WireModel):
    """vLLM's /v1/load_lora_adapter body."""

    lora_name: str
    lora_path: str


class UnloadLoRAAdapterRequest(WireModel):
    """vLLM's /v1/unload_lora_adapter body (``lora_int_id`` is accepted and not needed)."""

    lora_name: str
    lora_int_id: Int64 | None = None


class VersionResponse(BaseModel):
    version: str


class ServerLoadResponse(BaseModel):
    """vLLM's /load: the requests in flight (0 unless the server tracks them)."""

    server_load: int


class RouterModelRequest(RequestBody):
    """llama-server's router body (/models/load, /models/unload): the model, by the name
    clients use."""

    model: str


class RouterResponse(BaseModel):
    success: bool = True
