"""The checks EngineConfig's fields share, and speculative_config's settings (vLLM's)."""

from __future__ import annotations

from typing import Any

# disable_by_batch_size (vLLM's, >= 2): no proposals in a step with that many requests running
_SPEC = {"num_speculative_tokens": 4, "disable_by_batch_size": None}
_NGRAM = {**_SPEC, "prompt_lookup_max": 5, "prompt_lookup_min": 1}
_DRAFT = {**_SPEC, "model": None}
_SPEC_DEFAULTS: dict[Any, dict[str, Any]] = {"ngram": _NGRAM, "draft_model": _DRAFT}  # vLLM's


def choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def at_least(name: str, value: int | None, low: int, unset: object = ...) -> None:
    """``value`` an integer >= ``low``, or ``unset`` (an optional field's None)."""
    if value is unset:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def positive(name: str, value: float | None, zero: bool = False, unset: object = ...) -> None:
    """``value`` a number > 0 (``zero``: >= 0), or ``unset`` (an optional field's None)."""
    if value is unset:
        return
    if not isinstance(value, int | float) or not (value >= 0 if zero else value > 0):
        raise ValueError(f"{name} must be {'>=' if zero else '>'} 0, got {value!r}")


def speculative_settings(spec: object) -> dict[str, Any]:
    """vLLM's settings checked, with the method's defaults (``_SPEC_DEFAULTS``) filled in."""
    if not isinstance(spec, dict):
        raise ValueError(f"speculative_config must be a mapping, not {spec!r}")
    # vLLM's rule: a draft model named without a method is a draft model.
    method = spec.get("method") or ("draft_model" if spec.get("model") else None)
    choice("speculative_config's method", method, tuple(_SPEC_DEFAULTS))
    defaults = _SPEC_DEFAULTS[method]
    unknown = sorted(set(spec) - {"method", *defaults})
    if unknown:
        raise ValueError(f"speculative_config has unknown field(s) for {method}: {unknown}")
    out = {**defaults, **spec, "method": method}
    for name in set(defaults) - {"model", "disable_by_batch_size"}:
        at_least(f"speculative_config's {name}", out[name], 1)
    at_least("speculative_config's disable_by_batch_size", out["disable_by_batch_size"], 2, None)
    if method == "ngram" and out["prompt_lookup_min"] > out["prompt_lookup_max"]:
        raise ValueError("speculative_config's prompt_lookup_min must be <= prompt_lookup_max")
    if method == "draft_model" and not (isinstance(out["model"], str) and out["model"]):
        raise ValueError(f"speculative_config's model must name the draft model: {out['model']!r}")
    return out
