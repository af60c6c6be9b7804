"""SamplingParams and PoolingParams: what a request asks for, validated on construction."""

from __future__ import annotations

import enum
import json as jsonlib
import math
from dataclasses import dataclass, field, fields
from typing import Any

from llmkit.errors import ParamError


class RequestOutputKind(enum.Enum):
    """What each streamed output carries: everything so far, only the new part, or the end."""

    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


_KINDS = ("json", "json_object", "regex", "choice", "grammar")


@dataclass(frozen=True)
class StructuredOutputsParams:
    """A constraint on the generated text; exactly one field is set (vLLM's names).

    ``json`` is a JSON schema (a dict or its JSON text); ``json_object`` asks for any JSON
    object; ``regex`` is a regular expression the whole output matches; ``choice`` lists
    the strings the output may be; ``grammar`` is a Lark (or GBNF) grammar. The output
    ends (finish reason "stop") when the constraint is complete; if ``max_tokens`` runs
    out first, it ends with finish reason "length" and the text is incomplete.

    ``disable_any_whitespace`` (vLLM's name): JSON is compact, no whitespace between its
    tokens but the one after ``,`` and ``:`` (the default here, as OpenAI's strict answers
    are: free whitespace lets a weak model spend its whole budget on blanks); False lets
    the model write any whitespace there.
    """

    json: dict[str, Any] | str | None = None
    json_object: bool | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    disable_any_whitespace: bool = True

    def __post_init__(self) -> None:
        given = self._given()
        _check(
            len(given) == 1,
            "structured_outputs",
            f"must set exactly one of json, json_object, regex, choice, grammar; got {given}",
        )
        if isinstance(self.json, str):
            try:
                schema = jsonlib.loads(self.json)
            except ValueError as exc:
                raise ParamError(
                    "structured_outputs", f"structured_outputs.json is not valid JSON: {exc}"
                ) from None
            object.__setattr__(self, "json", schema)
        if self.json is not None:
            _check(
                isinstance(self.json, (dict, bool)),
                "structured_outputs.json",
                f"must be a JSON schema (an object), got {type(self.json).__name__}",
            )
        if self.choice is not None:
            _check(
                isinstance(self.choice, list) and len(self.choice) > 0,
                "structured_outputs.choice",
                "must be a non-empty list of strings",
            )
            _check(
                all(isinstance(c, str) and c for c in self.choice),
                "structured_outputs.choice",
                "must hold only non-empty strings",
            )
        for name in ("regex", "grammar"):
            value = getattr(self, name)
            if value is not None:
                _check(
                    isinstance(value, str) and value != "",
                    f"structured_outputs.{name}",
                    "must be a non-empty string",
                )

    @classmethod
    def of(cls, value: StructuredOutputsParams | dict[str, Any]) -> StructuredOutputsParams:
        """``value`` itself, or one built from a dict of its fields."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ParamError(
                "structured_outputs",
                f"structured_outputs must be an object, got {type(value).__name__}",
            )
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        _check(not unknown, "structured_outputs", f"has unknown fields {unknown}")
        return cls(**value)

    @property
    def kind(self) -> str:
        """The name of the field that is set."""
        return self._given()[0]

    def key(self) -> str:
        """A canonical text of the constraint: equal constraints have equal keys."""
        spaced = "" if self.disable_any_whitespace else "+ws"
        return self.kind + spaced + ":" + jsonlib.dumps(getattr(self, self.kind), sort_keys=True)

    def _given(self) -> list[str]:
        # json_object=False is "not asked for", as if left out.
        return [name for name in _KINDS if getattr(self, name) not in (None, False)]


@dataclass
class SamplingParams:
    """Sampling settings with vLLM's field names, defaults and checks."""

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    skip_special_tokens: bool = True
    # Accepted for vLLM compatibility; fast tokenizers decode special tokens as written.
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    # Constrained decoding (JSON schema, regex, choice, grammar); None: unconstrained.
    # A dict of StructuredOutputsParams' fields is accepted, and converted.
    structured_outputs: StructuredOutputsParams | None = None

    def __post_init__(self) -> None:
        if self.structured_outputs is not None:
            self.structured_outputs = StructuredOutputsParams.of(self.structured_outputs)
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.logit_bias:
            try:
                self.logit_bias = {int(k): float(v) for k, v in self.logit_bias.items()}
            except (TypeError, ValueError):
                raise ParamError("logit_bias", "logit_bias must map token ids to numbers") from None
        if self.top_k is None:
            self.top_k = 0
        self._check_types()
        if self.top_k < 0:
            # vLLM accepts -1 (and None) for "no top-k".
            self.top_k = 0
        self._verify()

    def _check_types(self) -> None:
        for name in _INT_FIELDS:
            value = getattr(self, name)
            _check(
                value is None or (isinstance(value, int) and not isinstance(value, bool)),
                name,
                f"must be an integer, got {value!r}",
            )
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            _check(
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value),
                name,
                f"must be a finite number, got {value!r}",
            )

    def _verify(self) -> None:
        _check(self.n >= 1, "n", f"must be at least 1, got {self.n}")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            _check(-2.0 <= value <= 2.0, name, f"must be in [-2, 2], got {value}")
        _check(
            self.repetition_penalty > 0.0,
            "repetition_penalty",
            f"must be greater than zero, got {self.repetition_penalty}",
        )
        _check(
            self.temperature >= 0.0, "temperature", f"must be non-negative, got {self.temperature}"
        )
        _check(0.0 < self.top_p <= 1.0, "top_p", f"must be in (0, 1], got {self.top_p}")
        _check(0.0 <= self.min_p <= 1.0, "min_p", f"must be in [0, 1], got {self.min_p}")
        if self.max_tokens is not None:
            _check(self.max_tokens >= 1, "max_tokens", f"must be at least 1, got {self.max_tokens}")
        _check(self.min_tokens >= 0, "min_tokens", f"must be >= 0, got {self.min_tokens}")
        if self.max_tokens is not None:
            _check(
                self.min_tokens <= self.max_tokens,
                "min_tokens",
                f"must be less than or equal to max_tokens={self.max_tokens}, "
                f"got {self.min_tokens}",
            )
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None:
                _check(value >= 0, name, f"must be non-negative, got {value}")
        _check(all(s for s in self.stop or []), "stop", "cannot contain an empty string")
        _check(
            all(isinstance(t, int) and t >= 0 for t in self.stop_token_ids or []),
            "stop_token_ids",
            "must hold non-negative token ids",
        )
        if self.allowed_token_ids is not None:
            _check(len(self.allowed_token_ids) > 0, "allowed_token_ids", "must not be empty")
            _check(
                all(isinstance(t, int) and t >= 0 for t in self.allowed_token_ids),
                "allowed_token_ids",
                "must hold non-negative token ids",
            )
        for token_id, bias in (self.logit_bias or {}).items():
            _check(
                token_id >= 0 and math.isfinite(bias),
                "logit_bias",
                f"must map non-negative token ids to finite numbers, got {token_id}: {bias}",
            )
        if self.seed is not None:
            _check(
                SEED_MIN <= self.seed <= SEED_MAX,
                "seed",
                f"must be in [{SEED_MIN}, {SEED_MAX}], got {self.seed}",
            )

    @property
    def greedy(self) -> bool:
        return self.temperature < _GREEDY_EPS

    @property
    def needs_penalties(self) -> bool:
        return (
            self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
            or self.repetition_penalty != 1.0
        )


_GREEDY_EPS = 1e-5
# What a torch generator takes: a 64-bit seed, signed or not (vLLM's range).
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1
_INT_FIELDS = ("n", "top_k", "seed", "max_tokens", "min_tokens", "logprobs", "prompt_logprobs")
_FLOAT_FIELDS = (
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "temperature",
    "top_p",
    "min_p",
)


@dataclass
class PoolingParams:
    """Settings of a pooling (embedding) request."""

    normalize: bool | None = None
    dimensions: int | None = None
    truncate_prompt_tokens: int | None = None
    pooling_type: str | None = None  # "last", "mean" or "cls"; None = the model's own
    output_kind: RequestOutputKind = field(default=RequestOutputKind.FINAL_ONLY, repr=False)

    def __post_init__(self) -> None:
        if self.dimensions is not None:
            _check(self.dimensions >= 1, "dimensions", f"must be at least 1, got {self.dimensions}")
        if self.truncate_prompt_tokens is not None:
            _check(
                self.truncate_prompt_tokens >= 1 or self.truncate_prompt_tokens == -1,
                "truncate_prompt_tokens",
                "must be at least 1 (or -1 for the model's maximum), "
                f"got {self.truncate_prompt_tokens}",
            )
        if self.pooling_type is not None:
            self.pooling_type = self.pooling_type.lower()
            _check(
                self.pooling_type in ("last", "mean", "cls"),
                "pooling_type",
                f"must be one of last, mean, cls; got {self.pooling_type!r}",
            )


def _check(ok: bool, name: str, message: str) -> None:
    if not ok:
        # A nested field (structured_outputs.choice) is blamed on the request's field.
        raise ParamError(name.partition(".")[0], f"{name} {message}")
