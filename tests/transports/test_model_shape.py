"""What a server says of a mixture of experts with sliding windows (a gpt-oss GGUF file): its
architecture, experts and window on /v1/models, Ollama's /api/show and in its log."""

from __future__ import annotations

import httpx
import pytest
from tests.model.gguf.test_gguf_archs import write_gguf


@pytest.fixture(scope="module")
def server(module_server, model_factory, tmp_path_factory):
    file = write_gguf(model_factory("gpt_oss"), tmp_path_factory.mktemp("oss") / "oss.gguf")
    return module_server(str(file), "--served-model-name", "oss")


def test_the_model_card_names_the_architecture_experts_and_window(server):
    card = httpx.get(f"{server.url}/v1/models").json()["data"][0]
    assert card["architecture"] == "GptOssForCausalLM"
    assert (card["num_experts"], card["num_experts_per_tok"], card["sliding_window"]) == (8, 2, 16)


def test_ollama_show_gives_the_files_expert_and_window_keys(server):
    info = httpx.post(f"{server.url}/api/show", json={"model": "oss"}).json()["model_info"]
    assert info["general.architecture"] == "gpt-oss"
    assert info["gpt-oss.expert_count"] == 8
    assert info["gpt-oss.expert_used_count"] == 2
    assert info["gpt-oss.attention.sliding_window"] == 16


def test_the_log_describes_the_model(server):
    log = server.log.read_text()
    assert "GptOssForCausalLM, 8 experts (2 a token), window 16 on 1 of 2 layers" in log
