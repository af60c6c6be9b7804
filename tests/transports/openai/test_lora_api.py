"""LoRA adapters over HTTP: `llmkit serve --enable-lora --lora-modules`, clients pick an
adapter by its name in `model` (the official openai client), runtime load and unload."""

from __future__ import annotations

import json
import subprocess

import anyio
import openai
import peft
import pytest
import torch
import transformers

MAX_TOKENS = 8
BASE = "tiny"
# served name -> the adapter it is built from (see LORAS in the top conftest)
ADAPTERS = {"attn": "attn-r4", "all": "all-r16"}
RUNTIME = "some-r8"


@pytest.fixture(scope="module")
def lora_server(tiny_model, lora_factory, module_server):
    modules = [
        f"attn={lora_factory('attn-r4')}",
        json.dumps({"name": "all", "path": lora_factory("all-r16"), "base_model_name": BASE}),
    ]
    return module_server(
        tiny_model,
        "--served-model-name",
        BASE,
        "--enable-lora",
        "--max-loras",
        "2",
        "--max-lora-rank",
        "16",
        "--lora-modules",
        *modules,
        "--enable-lora-runtime-updates",
        "--return-tokens-as-token-ids",
        "--max-model-len",
        "256",
        "--log-level",
        "warning",
    )


@pytest.fixture
async def lora_client(lora_server, anyio_backend):
    async with openai.AsyncOpenAI(
        base_url=lora_server.base_url, api_key="x", max_retries=0
    ) as client:
        yield client


@pytest.fixture(scope="module")
def expected(tiny_model, lora_factory):
    """HF + peft's greedy tokens for the prompt, by the name the server gives each model."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    prompt = tokenizer.encode("the cache keeps every block of the engine", add_special_tokens=False)
    tokens = {}
    for name, adapter in [(BASE, None), *ADAPTERS.items(), ("runtime", RUNTIME)]:
        hf = transformers.AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
        if adapter is not None:
            hf = peft.PeftModel.from_pretrained(hf, lora_factory(adapter))
        hf.generation_config.eos_token_id = None
        out = hf.eval().generate(
            torch.tensor([prompt]),
            max_new_tokens=MAX_TOKENS,
            do_sample=False,
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            pad_token_id=0,
        )
        tokens[name] = out[0, len(prompt) :].tolist()
    return prompt, tokens


async def _greedy(client: openai.AsyncOpenAI, model: str, prompt: list[int]) -> list[int]:
    result = await client.completions.create(
        model=model,
        prompt=prompt,
        max_tokens=MAX_TOKENS,
        temperature=0,
        logprobs=1,
        extra_body={"ignore_eos": True},
    )
    # --return-tokens-as-token-ids names each token "token_id:N".
    return [int(t.split(":")[1]) for t in result.choices[0].logprobs.tokens]


def test_models_lists_the_adapters_under_the_base_model(lora_server, lora_factory):
    models = {
        m.id: m for m in openai.OpenAI(base_url=lora_server.base_url, api_key="x").models.list()
    }
    assert set(models) == {BASE, *ADAPTERS}
    for name, adapter in ADAPTERS.items():
        assert models[name].parent == BASE
        assert models[name].root == lora_factory(adapter)
    assert models[BASE].parent is None


@pytest.mark.anyio
async def test_each_name_gives_its_models_output_batched_together(lora_client, expected):
    prompt, tokens = expected
    client = lora_client
    got: dict[str, list[int]] = {}

    async def run(name: str) -> None:
        got[name] = await _greedy(client, name, prompt)

    async with anyio.create_task_group() as tg:
        for name in [BASE, *ADAPTERS, BASE, "attn"]:
            tg.start_soon(run, name)
    assert got == {name: tokens[name] for name in [BASE, *ADAPTERS]}
    # Chat picks the adapter the same way.
    messages = [{"role": "user", "content": "hello there"}]
    replies = {}
    for name in [BASE, "attn"]:
        chat = await client.chat.completions.create(
            model=name, messages=messages, max_tokens=MAX_TOKENS, temperature=0
        )
        assert chat.model == name
        replies[name] = chat.choices[0].message.content
    assert replies[BASE] != replies["attn"]


@pytest.mark.anyio
async def test_an_adapter_loaded_at_runtime_serves_until_unloaded(
    lora_server, lora_client, expected, lora_factory
):
    prompt, tokens = expected
    client = lora_client
    with pytest.raises(openai.NotFoundError, match=r"The model `runtime` does not exist\."):
        await _greedy(client, "runtime", prompt)
    with lora_server.http(None) as http:
        body = {"lora_name": "runtime", "lora_path": lora_factory(RUNTIME)}
        loaded = http.post("/v1/load_lora_adapter", json=body)
        assert loaded.status_code == 200, loaded.text
        again = http.post("/v1/load_lora_adapter", json=body)
        assert again.status_code == 400
        assert (
            again.json()["error"]["message"]
            == "The lora adapter 'runtime' has already been loaded."
        )
        bad = http.post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": "/nowhere"})
        assert (
            bad.status_code == 400 and "not a PEFT adapter folder" in bad.json()["error"]["message"]
        )
        assert await _greedy(client, "runtime", prompt) == tokens["runtime"]
        assert "runtime" in {m["id"] for m in http.get("/v1/models").json()["data"]}

        assert (
            http.post("/v1/unload_lora_adapter", json={"lora_name": "runtime"}).status_code == 200
        )
        with pytest.raises(openai.NotFoundError) as gone:
            await _greedy(client, "runtime", prompt)
        assert gone.value.code == "model_not_found"
        missing = http.post("/v1/unload_lora_adapter", json={"lora_name": "runtime"})
        assert missing.status_code == 404
    # The adapters from the command line are untouched.
    assert await _greedy(client, "all", prompt) == tokens["all"]


def test_runtime_updates_are_off_unless_asked_for(server):
    with server.http() as http:
        response = http.post("/v1/load_lora_adapter", json={"lora_name": "a", "lora_path": "/x"})
    assert response.status_code == 404


def test_a_bad_adapter_stops_the_start(tiny_model, lora_factory, llmkit_cmd):
    result = subprocess.run(
        [
            *llmkit_cmd,
            "serve",
            tiny_model,
            "--enable-lora",
            "--max-lora-rank",
            "8",
            "--lora-modules",
            f"big={lora_factory('all-r16')}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--lora-modules: LoRA adapter 'big'" in result.stderr
    assert "more than max_lora_rank=8" in result.stderr
