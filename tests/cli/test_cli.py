"""The `llmkit` command: run, chat against a server, demo-model, and serve's graceful SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx
import pytest

MODEL = "tiny"


def test_run_streams_the_greedy_completion(llmkit_cmd, tiny_model, client):
    result = subprocess.run(
        [*llmkit_cmd, "run", tiny_model, "Once upon", "--max-tokens", "8", "--temperature", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    expected = client.completions.create(
        model=MODEL, prompt="Once upon", max_tokens=8, temperature=0
    )
    assert result.stdout == expected.choices[0].text + "\n"


# The peak memory of the one child process it runs, in KiB (Linux).
PEAK_RSS = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def test_run_sizes_its_kv_cache_to_its_one_sequence(llmkit_cmd):
    """`llmkit run` holds one request: the KV cache of one max_model_len sequence rather
    than the 2 GiB CPU budget (2.6 GB of memory for the 25M-parameter demo)."""
    command = [*llmkit_cmd, "run", "demo", "Hello", "--max-tokens", "4"]
    result = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert int(result.stdout.splitlines()[-1]) < 1 << 20


# `llmkit chat` as an install without the test extras runs it: no openai package.
WITHOUT_OPENAI = (
    "import sys; sys.modules['openai'] = None; from llmkit.cli import main; sys.exit(main())"
)


def test_chat_with_a_running_server(server, client):
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_OPENAI,
            "chat",
            "--url",
            server.url,
            "--api-key",
            "test-key",
            "--max-tokens",
            "6",
            "--temperature",
            "0",
        ],
        input="hello\nand again\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    first = (
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=6,
            temperature=0,
        )
        .choices[0]
        .message.content
    )
    lines = result.stdout.split("\n")
    assert lines[0] == first and len(lines) == 3 and lines[2] == ""


def test_chat_with_a_refused_key_is_one_line_of_error(server):
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENAI, "chat", "--url", server.url, "--api-key", "no"],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("llmkit: error: HTTP 401: ")
    assert len(result.stderr.splitlines()) == 1


def test_demo_model_builds_a_loadable_directory(llmkit_cmd, tmp_path):
    path = tmp_path / "tiny-demo"
    subprocess.run(
        [*llmkit_cmd, "demo-model", str(path), "--tiny"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    config = json.loads((path / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and (path / "tokenizer.json").exists()


def test_bad_engine_flag_is_a_clean_error(llmkit_cmd, tiny_model):
    result = subprocess.run(
        [*llmkit_cmd, "run", tiny_model, "x", "--block-size", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        result.returncode != 0
        and "block_size" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_sigterm_finishes_in_flight_streams_then_exits(start_server, tiny_model):
    proc, url = start_server(tiny_model, "--shutdown-timeout", "20")
    body = {"prompt": "drain me", "max_tokens": 200, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as response:
        lines = response.iter_lines()
        first = next(line for line in lines if line)
        proc.send_signal(signal.SIGTERM)
        rest = [line for line in lines if line]
    assert first.startswith("data: ")
    assert rest[-1] == "data: [DONE]"
    assert json.loads(rest[-2][len("data: ") :])["choices"][0]["finish_reason"] == "length"
    proc.wait(30)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health", timeout=2)
