"""`llmkit serve --speculative-config JSON`: the server speculates, /metrics counts it, and a
bad config stops the server at start with the field named."""

from __future__ import annotations

import json
import subprocess

import httpx
import openai

from servers import llmkit_command

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2}


def test_served_completions_speculate_and_metrics_count_it(module_server):
    server = module_server("smollm2", "--speculative-config", json.dumps(NGRAM))
    client = openai.OpenAI(base_url=server.base_url, api_key="x")
    text = "The cat sat on the mat. The dog sat on the log. " * 3
    out = client.completions.create(
        model="smollm2", prompt=text + "Repeat: The cat", max_tokens=24, temperature=0
    )
    assert out.usage is not None and out.usage.completion_tokens == 24
    metrics = httpx.get(server.url + "/metrics").text
    counters = {
        line.split()[0]: float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("llmkit:spec_decode_")
    }
    assert counters["llmkit:spec_decode_num_draft_tokens_total"] > 0
    assert counters["llmkit:spec_decode_num_drafts_total"] > 0
    assert (
        0
        < counters["llmkit:spec_decode_num_accepted_tokens_total"]
        <= (counters["llmkit:spec_decode_num_draft_tokens_total"])
    )


def test_a_bad_speculative_config_names_the_field():
    bad = json.dumps({"method": "ngram", "num_speculative_tokens": 0})
    done = subprocess.run(
        [*llmkit_command(), "serve", "demo", "--speculative-config", bad],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "num_speculative_tokens" in done.stderr
