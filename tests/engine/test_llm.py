"""The offline LLM API: prompt forms, input order, validation, chat templates."""

from __future__ import annotations

import json
import shutil

import pytest

from llmkit import LLM, EngineConfig, SamplingParams
from llmkit.errors import RequestFailedError

GREEDY = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, max_model_len=128)


def test_prompt_forms_agree(llm):
    tok = llm._core.tokenizer
    ids = tok.encode("Hello world")
    outs = llm.generate(
        ["Hello world", {"prompt": "Hello world"}, {"prompt_token_ids": ids}, ids],
        GREEDY,
        use_tqdm=False,
    )
    assert len({tuple(o.outputs[0].token_ids) for o in outs}) == 1
    assert outs[0].prompt == "Hello world" and outs[0].prompt_token_ids == ids
    assert llm.generate(ids, GREEDY, use_tqdm=False)[0].prompt_token_ids == ids


def test_results_come_in_input_order(llm):
    prompts = [f"prompt {i} " + "word " * (20 - i) for i in range(12)]
    batched = llm.generate(prompts, GREEDY, use_tqdm=False)
    for prompt, out in zip(prompts, batched):
        assert out.prompt == prompt
        assert (
            out.outputs[0].token_ids
            == llm.generate(prompt, GREEDY, use_tqdm=False)[0].outputs[0].token_ids
        )


def test_one_params_per_prompt_and_mismatch(llm):
    outs = llm.generate(
        ["a", "b"], [SamplingParams(max_tokens=2), SamplingParams(max_tokens=5)], use_tqdm=False
    )
    assert [len(o.outputs[0].token_ids) <= n for o, n in zip(outs, (2, 5))] == [True, True]
    with pytest.raises(ValueError, match="2 entries for 3 prompts"):
        llm.generate(["a", "b", "c"], [GREEDY, GREEDY], use_tqdm=False)


def test_too_long_prompt_names_both_lengths_and_queues_nothing(llm):
    long_prompt = list(range(5, 205))
    with pytest.raises(
        ValueError, match=r"context length is 128 tokens.*your prompt resulted in 200"
    ):
        llm.generate(["fine", long_prompt], GREEDY, use_tqdm=False)
    stats = llm.stats()
    assert stats.num_running == 0 and stats.num_waiting == 0


def test_bad_token_ids_and_params_are_value_errors(llm):
    with pytest.raises(ValueError, match="out of vocabulary"):
        llm.generate([[1, 10**7]], GREEDY, use_tqdm=False)
    with pytest.raises(ValueError, match="empty"):
        llm.generate([[]], GREEDY, use_tqdm=False)
    with pytest.raises(ValueError, match="max_logprobs"):
        llm.generate("x", SamplingParams(logprobs=50), use_tqdm=False)
    for bad in (
        dict(temperature=-1),
        dict(top_p=0),
        dict(n=0),
        dict(max_tokens=0),
        dict(min_tokens=5, max_tokens=2),
        dict(stop=[""]),
        dict(presence_penalty=3),
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SamplingParams(**bad)


def test_max_tokens_is_capped_by_the_context(llm):
    out = llm.generate(
        [list(range(5, 125))], SamplingParams(max_tokens=None, ignore_eos=True), use_tqdm=False
    )
    assert len(out[0].outputs[0].token_ids) == 128 - 120
    assert out[0].outputs[0].finish_reason == "length"


def test_max_tokens_past_the_context_is_refused_with_the_counts(llm):
    """The HTTP app's rule and words: never a silent clamp."""
    counts = r"130 tokens \(120 in the prompt, 10 in the completion\)"
    with pytest.raises(ValueError, match=rf"maximum context length is 128 tokens.*{counts}"):
        llm.generate([list(range(5, 125))], SamplingParams(max_tokens=10), use_tqdm=False)
    out = llm.generate([list(range(5, 125))], SamplingParams(max_tokens=8), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) <= 8


def test_chat_uses_the_template_without_a_double_bos(llm):
    tok = llm._core.tokenizer
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    out = llm.chat(messages, GREEDY, use_tqdm=False)[0]
    assert out.prompt_token_ids.count(tok.bos_token_id) == 1
    assert out.prompt_token_ids[0] == tok.bos_token_id
    assert out.prompt.endswith("<|assistant|>\n")
    assert len(llm.chat([messages, messages], GREEDY, use_tqdm=False)) == 2
    cont = llm.chat(
        [*messages, {"role": "assistant", "content": "Sure"}],
        GREEDY,
        use_tqdm=False,
        add_generation_prompt=False,
        continue_final_message=True,
    )[0]
    assert cont.prompt.endswith("Sure")


def test_progress_bar_reports_requests_and_throughput(llm, capsys):
    llm.generate(["a", "b", "c"], GREEDY, use_tqdm=True)
    err = capsys.readouterr().err
    assert "3/3" in err and "tok/s" in err


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="block_size"):
        EngineConfig(model="x", block_size=3)
    with pytest.raises(ValueError, match="dtype"):
        EngineConfig(model="x", dtype="float8")
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        EngineConfig(model="x", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="max_num_seqs"):
        EngineConfig(model="x", max_num_seqs=0)
    with pytest.raises(TypeError, match="unknown EngineConfig field"):
        LLM("x", not_a_field=1)


def test_max_model_len_beyond_the_model_is_rejected(tiny_model):
    with pytest.raises(ValueError, match="max_position_embeddings"):
        LLM(tiny_model, max_model_len=10**6)


def test_a_missing_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^no model directory at '/no/such/dir'; "):
        LLM("/no/such/dir")
    with pytest.raises(FileNotFoundError, match=r"holds no config\.json$"):
        LLM(str(tmp_path))


def test_unsupported_architecture_lists_the_supported_ones(tiny_model, tmp_path):
    path = tmp_path / "gpt2ish"
    shutil.copytree(tiny_model, path)
    config = json.loads((path / "config.json").read_text())
    config["architectures"] = ["GPT2LMHeadModel"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"LlamaForCausalLM.*Qwen3ForCausalLM"):
        LLM(str(path))


def test_a_config_without_architectures_loads_by_model_type(tiny_model, tmp_path):
    # transformers' GGUF conversion writes such a config.
    path = tmp_path / "no-architectures"
    shutil.copytree(tiny_model, path)
    config = json.loads((path / "config.json").read_text())
    del config["architectures"]
    (path / "config.json").write_text(json.dumps(config))
    expected = LLM(tiny_model).generate("Hello", GREEDY, use_tqdm=False)[0].outputs[0].token_ids
    assert (
        LLM(str(path)).generate("Hello", GREEDY, use_tqdm=False)[0].outputs[0].token_ids == expected
    )


def test_sharded_checkpoints_load(tiny_model, tmp_path):
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(tiny_model)
    path = tmp_path / "sharded"
    hf.save_pretrained(path, max_shard_size="100KB")
    shutil.copy(f"{tiny_model}/tokenizer.json", path)
    shutil.copy(f"{tiny_model}/tokenizer_config.json", path)
    assert (path / "model.safetensors.index.json").exists()
    expected = LLM(tiny_model).generate("Hello", GREEDY, use_tqdm=False)[0].outputs[0].token_ids
    assert (
        LLM(str(path)).generate("Hello", GREEDY, use_tqdm=False)[0].outputs[0].token_ids == expected
    )


def test_a_prompt_larger_than_the_kv_cache_fails_instead_of_waiting_forever(tiny_model):
    llm = LLM(tiny_model, max_model_len=512, num_kv_blocks=4, max_num_batched_tokens=32)
    params = SamplingParams(max_tokens=4, temperature=0)
    with pytest.raises(RequestFailedError, match="more KV cache than the engine holds"):
        llm.generate([list(range(5, 200))], params, use_tqdm=False)
    # The engine goes on: a prompt that fits runs.
    assert (
        len(llm.generate([list(range(5, 20))], params, use_tqdm=False)[0].outputs[0].token_ids) == 4
    )
