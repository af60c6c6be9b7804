"""Ollama's model endpoints: /api/tags, /api/show and /api/ps, from the models' own files."""

from __future__ import annotations

from datetime import datetime, timezone

from llmkit.engine.protocol import EngineProtocol
from llmkit.manager.facts import ModelFacts, read_facts
from llmkit.protocol.ollama import (
    Details,
    ListedModel,
    ListResponse,
    PsResponse,
    RunningModel,
    ShowResponse,
)
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError

# What /api/ps says of a model kept forever: Ollama's own far-off date.
_FOREVER = "2318-01-01T00:00:00Z"


def served_names(ctx: ServingContext) -> list[str]:
    return ctx.models.names if ctx.models is not None else ctx.model_names


def ollama_name(ctx: ServingContext, requested: str) -> str:
    """The served name ``requested`` means (Ollama clients add ``:latest``); a 404 if none."""
    names = served_names(ctx)
    for name in (requested, requested.removesuffix(":latest")):
        if name in names:
            return name
    raise OpenAIError(404, f'model "{requested}" not found; this server serves: {", ".join(names)}')


def _model(ctx: ServingContext, name: str) -> str:
    """What ``name`` loads: a directory, a GGUF file, ``smollm2``."""
    if ctx.models is not None:
        return ctx.models.settings(name).config.model
    return ctx.engine.model_info.name


def facts(ctx: ServingContext, name: str) -> ModelFacts:
    try:
        return read_facts(_model(ctx, name))
    except ValueError as exc:
        raise OpenAIError(500, f'model "{name}": {exc}') from None


def _details(f: ModelFacts) -> Details:
    return Details(
        format=f.format,
        family=f.architecture,
        families=[f.architecture],
        parameter_size=f.parameter_size,
        quantization_level=f.quantization_level,
    )


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat().replace("+00:00", "Z")


def _listed(ctx: ServingContext, name: str) -> ListedModel | None:
    try:
        f = facts(ctx, name)
    except OpenAIError:  # a file that cannot be read is no model to list
        return None
    return ListedModel(
        name=name,
        model=name,
        modified_at=_iso(f.modified),
        size=f.size,
        digest=f.digest,
        details=_details(f),
    )


def list_tags(ctx: ServingContext) -> ListResponse:
    listed = [_listed(ctx, name) for name in served_names(ctx)]
    return ListResponse(models=[m for m in listed if m is not None])


def show(ctx: ServingContext, requested: str) -> ShowResponse:
    name = ollama_name(ctx, requested)
    f = facts(ctx, name)
    capabilities = ["embedding"] if f.is_encoder else ["completion"]
    if f.infill:
        capabilities.append("insert")
    if not f.is_encoder and "tools" in f.chat_template:
        capabilities.append("tools")
    if not f.is_encoder and ("think" in f.chat_template or ctx.reasoning_parser is not None):
        capabilities.append("thinking")
    engine = ctx.models.loaded_engine(name) if ctx.models is not None else ctx.engine
    if engine is not None and engine.model_info.supports_images:
        capabilities.append("vision")
    info: dict[str, object] = {
        "general.architecture": f.architecture,
        "general.parameter_count": f.parameter_count,
    }
    for key in ("context_length", "expert_count", "expert_used_count", "sliding_window"):
        value = getattr(f, key)
        if value is not None:  # GGUF's metadata key for it
            name = "attention.sliding_window" if key == "sliding_window" else key
            info[f"{f.architecture}.{name}"] = value
    return ShowResponse(
        modelfile=f"FROM {f.path}\n",
        parameters="",
        template=f.chat_template,
        details=_details(f),
        model_info=info,
        capabilities=capabilities,
        modified_at=_iso(f.modified),
    )


def ps(ctx: ServingContext, now: float) -> PsResponse:
    """The loaded models; ``now``: Unix seconds, for their expiry times."""
    running = []
    entries: list[tuple[str, EngineProtocol | None, float | None, int]]
    if ctx.models is None:
        entries = [(ctx.model_name, ctx.engine, None, 0)]
    else:
        entries = [
            (s.name, ctx.models.loaded_engine(s.name), s.expires_in_s, s.resident_bytes)
            for s in ctx.models.status()
            if s.state == "loaded"
        ]
    for name, engine, expires_in, size in entries:
        listed = _listed(ctx, name)
        if listed is None or engine is None:
            continue
        expires = _FOREVER if expires_in is None else _iso(now + expires_in)
        running.append(
            RunningModel(
                **listed.model_dump(exclude={"size"}),
                size=size or listed.size,
                expires_at=expires,
                context_length=engine.model_info.max_model_len,
            )
        )
    return PsResponse(models=running)
