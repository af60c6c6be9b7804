"""Builds small random-weight models with a locally trained tokenizer, deterministically.

The built-in ``demo`` model and every test model come from here: a HuggingFace model
directory (config.json, model.safetensors, tokenizer.json with a chat template) that
llmkit and transformers both load, so no test needs a network.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmkit.model import registry

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

DEMO_MODEL_NAME = "demo"
_FORMAT_VERSION = 2

# Tools go in a system turn of their own; calls are written as the hermes parser reads
# them; tool results are <|tool|> turns.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}<|system|>\nTools: {{ tools | tojson }}</s>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message['content'] is string %}{% set content = message['content'] %}"
    "{% elif message['content'] %}"
    "{% set content = message['content'] | map(attribute='text') | join('') %}"
    "{% else %}{% set content = '' %}{% endif %}"
    "<|{{ message['role'] }}|>\n{{ content }}"
    "{% for call in message['tool_calls'] or [] %}"
    '<tool_call>{"name": {{ call.function.name | tojson }}, "arguments": '
    "{{ call.function.arguments | tojson }}}</tool_call>"
    "{% endfor %}"
    "{% if not (loop.last and continue_final_message) %}</s>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = [
    "<unk>",
    "<s>",
    "</s>",
    "<pad>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
]

_WORDS = (
    "the a an of to and in is was for on that with as by at from it this be are or have not "
    "but had his her they you we he she which one all were there their what so up out if about "
    "who get would make can like time no just him know take people into year your good some "
    "could them see other than then now look only come its over think also back after use two "
    "how our work first well way even new want because any these give day most us model token "
    "engine serve batch cache block paged attention kernel request stream tensor layer prompt "
    "sample output text chat user assistant system message reply hello world python async await "
    "river mountain forest ocean cloud light music story garden window coffee morning evening "
    "quick brown fox jumps lazy dog red green blue yellow small large happy quiet bright "
    "question answer number value list table file line word letter sound color night city "
    "café naïve résumé über straße ñandú 日本語 中文 한국어 こんにちは 🙂 🚀 ∑ π"
).split()


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a generated model; the same spec always builds the same files."""

    architecture: str = "llama"  # the model_type of a registry decoder: llama, mistral, qwen2, ...
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int | None = None
    intermediate_size: int = 128
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = None
    # Larger than HF's 0.02 so that random logits have clear winners: greedy comparisons
    # between implementations then do not hinge on float rounding.
    initializer_range: float = 0.1
    seed: int = 0
    # None: the tokenizer's size. More pads the embeddings and head with ids no text maps
    # to, for benchmark shapes whose vocabulary is part of the cost (token-id prompts).
    vocab_size: int | None = None
    # Qwen2.5-Coder's fill-in-the-middle tokens added to the tokenizer (a code model's).
    fim: bool = False

    def __post_init__(self) -> None:
        if registry.by_model_type(self.architecture, "decoder") is None:
            raise ValueError(
                f"the demo builder makes no {self.architecture!r} model; it makes "
                + ", ".join(registry.model_types("decoder"))
            )


FIM_TOKENS = (
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)

DEMO_SPEC = ModelSpec(
    hidden_size=512,
    num_layers=8,
    num_heads=8,
    num_kv_heads=4,
    intermediate_size=1536,
    max_position_embeddings=4096,
)


def default_cache_dir() -> Path:
    return Path.home() / ".cache" / "llmkit"


def build_demo(cache_dir: Path | None = None) -> Path:
    """The ``demo`` model's folder, built once under ``cache_dir``."""
    return build_model((cache_dir or default_cache_dir()) / f"demo-v{_FORMAT_VERSION}", DEMO_SPEC)


def build_model(path: str | os.PathLike, spec: ModelSpec = ModelSpec()) -> Path:
    """Write the model for ``spec`` to ``path`` unless it is already there; return the path."""

    def write(tmp: Path) -> None:
        tokenizer = _tokenizer()
        if spec.fim:
            tokenizer = copy.deepcopy(tokenizer)
            tokenizer.add_tokens(list(FIM_TOKENS), special_tokens=True)
        tokenizer.save_pretrained(tmp)
        _model(spec, spec.vocab_size or len(tokenizer), tokenizer).save_pretrained(
            tmp, safe_serialization=True
        )

    return build_once(path, asdict(spec), write)


def build_once(
    path: str | os.PathLike, spec: dict[str, Any], write: Callable[[Path], None]
) -> Path:
    """``write`` a model folder for ``spec`` to ``path`` unless one is already there."""
    path = Path(path)
    marker = path / "llmkit_spec.json"
    wanted = json.dumps(spec, sort_keys=True)
    if marker.exists() and marker.read_text() == wanted:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename, so concurrent builders never see half a model.
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}-"))
    try:
        write(tmp)
        (tmp / "llmkit_spec.json").write_text(wanted)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _corpus(num_lines: int = 4000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(num_lines):
        words = rng.choices(_WORDS, k=rng.randint(4, 16))
        sentence = " ".join(words).capitalize() + rng.choice([".", "!", "?", ",", ":"])
        lines.append(sentence)
    return lines


@functools.lru_cache(maxsize=1)
def _tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL_TOKENS[4:],
        chat_template=CHAT_TEMPLATE,
        model_max_length=1 << 20,
    )


def _model(spec: ModelSpec, vocab_size: int, tokenizer: PreTrainedTokenizerFast) -> PreTrainedModel:
    import torch
    import transformers

    entry = registry.by_model_type(spec.architecture, "decoder")
    assert entry is not None  # ModelSpec checked it
    rope = {"rope_type": "default", "rope_theta": spec.rope_theta}
    if spec.rope_scaling:
        rope.update(dict(spec.rope_scaling))
    kwargs = dict(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        initializer_range=spec.initializer_range,
        rope_parameters=rope,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if spec.head_dim is not None:
        kwargs["head_dim"] = spec.head_dim
    # A family's fields replace the spec's (Gemma's rope_parameters, one table per layer type).
    config = getattr(transformers, entry.config_class)(**{**kwargs, **entry.config, **entry.demo})
    torch.manual_seed(spec.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # HF initialises biases to zero (Qwen2's q/k/v); random ones make the bias path observable.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0.0, spec.initializer_range)
    return model.eval()
