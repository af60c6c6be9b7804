"""What the OpenAI request and response models share: errors, usage, sampling fields."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any, ClassVar, Generic, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from llmkit.sampling_params import SEED_MAX, SEED_MIN

MAX_N = 128
# The widest integers any field takes: what the engine and the msgpack wire carry.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _finite(value: Any) -> Any:
    """Refuse NaN and infinities anywhere inside free-form JSON (they are not JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must hold only finite numbers, got {value}")
    if isinstance(value, dict):
        for item in value.values():
            _finite(item)
    elif isinstance(value, list):
        for item in value:
            _finite(item)
    return value


def integral(value: Any) -> Any:
    """5.0 as 5: JSON Schema's integers include it, which strict mode alone would refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _not_zero(value: int) -> int:
    if value == 0:
        raise PydanticCustomError("truncation", "must be at least 1, or -1 for the model's maximum")
    return value


# An integer as JSON Schema has it: 5 or 5.0, not 5.5, "5" or true.
Integer = Annotated[int, BeforeValidator(integral)]
# Integers in the 64-bit range; bigger ones are refused at parse, naming the field.
# (The bounds come before the validator, or the JSON schema would not state them.)
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX), BeforeValidator(integral)]
Seed = Annotated[int, Field(ge=SEED_MIN, le=SEED_MAX), BeforeValidator(integral)]
NonNegativeInt = Annotated[int, Field(ge=0, le=INT64_MAX), BeforeValidator(integral)]
PositiveInt = Annotated[int, Field(ge=1, le=INT64_MAX), BeforeValidator(integral)]
# How many sequences a request may run for its choices (OpenAI's bound on n).
Count = Annotated[int, Field(ge=1, le=MAX_N), BeforeValidator(integral)]
# A prompt cut to its last tokens: at least one, or -1 for the model's maximum (the served
# model's document bounds it by its context).
Truncation = Annotated[
    int,
    Field(ge=-1, le=INT64_MAX, json_schema_extra={"not": {"const": 0}}),
    BeforeValidator(integral),
    AfterValidator(_not_zero),
]
# Text that must say something (a stop string, a text to embed), and a list of at least one.
T = TypeVar("T")
NonEmpty = Annotated[str, Field(min_length=1)]
Some = Annotated[list[T], Field(min_length=1)]
# A JSON object whose values are free-form JSON (a template's kwargs, a JSON schema).
JsonObject = Annotated[dict[str, Any], AfterValidator(_finite)]


class WireModel(BaseModel):
    """A model of request JSON: types are strict (``"yes"`` is not a boolean, ``"5"`` not an
    integer, as OpenAI answers), and numbers are finite (``1e999``, ``NaN`` are refused)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)


class RequestBody(WireModel):
    # Unknown fields are kept in ``model_extra`` so serving can log and ignore them, as
    # OpenAI clients send fields a server may not know.
    model_config = ConfigDict(extra="allow")


class SparseModel(BaseModel):
    """A model that leaves out the fields in ``_omit_unless_set`` unless they were set.

    OpenAI's stream chunks carry ``usage`` only when the client asked for it, and a chat
    delta carries only the keys that changed.
    """

    _omit_unless_set: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for name in self._omit_unless_set - self.model_fields_set:
            data.pop(name, None)
        return data


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorInfo


class StreamOptions(WireModel):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class PromptTokensDetails(BaseModel):
    cached_tokens: int | None = None


class UsageInfo(SparseModel):
    _omit_unless_set = frozenset({"prompt_tokens_details"})

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None

    @classmethod
    def of(
        cls, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None
    ) -> UsageInfo:
        """Usage with its total; ``cached_tokens`` (if given) as ``prompt_tokens_details``."""
        usage = cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )
        if cached_tokens is not None:
            usage.prompt_tokens_details = PromptTokensDetails(cached_tokens=cached_tokens)
        return usage


def now_seconds() -> int:
    return int(time.time())


ChoiceT = TypeVar("ChoiceT")


class ChoicesResponse(BaseModel, Generic[ChoiceT]):
    """OpenAI's envelope of a whole completion or chat completion: each names its ``object``."""

    id: str
    object: str
    created: int = Field(default_factory=now_seconds)
    model: str
    choices: list[ChoiceT]
    usage: UsageInfo


class StructuredOutputs(WireModel):
    """vLLM's structured_outputs: exactly one kind of constraint (the engine checks that)."""

    model_config = ConfigDict(extra="forbid")

    # ``json`` is a BaseModel attribute, so the field takes another name.
    json_schema: JsonObject | None = Field(default=None, alias="json")
    json_object: bool | None = None
    regex: NonEmpty | None = None
    # An empty choice is no answer at all: with min_tokens no token could ever be drawn.
    choice: Some[NonEmpty] | None = None
    grammar: NonEmpty | None = None


def _structured(value: dict[str, Any]) -> dict[str, Any]:
    # Checked as the model, kept as the dict the engine takes.
    try:
        StructuredOutputs.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise PydanticCustomError("structured_outputs", f"{where}: {error['msg']}") from None
    return value


class SamplingFields(RequestBody):
    """Sampling fields common to completions and chat, with vLLM's extras."""

    model: str | None = None
    n: Count = 1
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    # "" would stop at once.
    stop: NonEmpty | list[NonEmpty] | None = None
    seed: Seed | None = None
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    logit_bias: dict[str, Annotated[float, Field(ge=-100.0, le=100.0)]] | None = None
    user: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    echo: bool = False
    # vLLM's extra sampling parameters.
    top_k: Int64 | None = None
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    min_tokens: NonNegativeInt = 0
    ignore_eos: bool = False
    stop_token_ids: list[NonNegativeInt] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    prompt_logprobs: NonNegativeInt | None = None
    priority: Int64 = 0
    # vLLM's constrained decoding: one of json, json_object, regex, choice, grammar;
    # checked by the engine, which names the bad field.
    structured_outputs: Annotated[JsonObject, AfterValidator(_structured)] | None = None


# Token ids are checked against the vocabulary when tokenized, naming the bad one (the
# served model's document states their range).
TokenIds = Some[Integer]
# A prompt: one string, several, one token-id list, or several.
PromptInput = str | Some[str] | TokenIds | Some[TokenIds]
# Texts to embed or score: as a prompt, but no text may be empty (OpenAI's embeddings refuse
# it; a tokenizer would turn it into [CLS] [SEP] and embed that).
TextInput = NonEmpty | Some[NonEmpty] | TokenIds | Some[TokenIds]
