"""Each example runs as a user would run it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(script: str, *args: str) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_offline_generate(tiny_model):
    out = _run("offline_generate.py", tiny_model)
    assert out.count("->") == 3


def test_async_generate_streams_three_requests(tiny_model):
    out = _run("async_generate.py", tiny_model)
    assert {"[a]", "[b]", "[c]"} <= {
        line.split()[0] for line in out.splitlines() if line.startswith("[")
    }


def test_unix_client_talks_to_an_engine_in_another_process(tiny_model, tmp_path):
    path = tmp_path / "engine.sock"
    command = ["engine", tiny_model, "--socket", str(path), "--log-level", "warning"]
    with _running(command, (socket.AF_UNIX, str(path))):
        out = _run("unix_client.py", str(path))
    lines = out.splitlines()
    assert lines[0] == f"connected to {tiny_model} (max_model_len 2048)"
    assert {"[a]", "[b]"} <= {line.split()[0] for line in lines[1:-1]}
    assert lines[-1].startswith("the engine has generated ")


def test_structured_json_prints_parsed_objects(tiny_model):
    out = _run("structured_json.py", tiny_model)
    assert out.count("->") == 3


def test_websocket_chat_streams_two_chats_and_cancels_a_third(tiny_model, tmp_path):
    port = _free_port()
    with _running(
        ["serve", tiny_model, "--port", str(port)], (socket.AF_INET, ("127.0.0.1", port))
    ):
        out = _run("websocket_chat.py", f"ws://127.0.0.1:{port}/v1/ws")
    lines = out.splitlines()
    assert "[a] finished: length" in lines and "[b] finished: length" in lines
    assert lines.count("[c] cancelled after 2 chunks") == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _running(command: list[str], address: tuple[int, object]) -> Iterator[None]:
    """``llmkit COMMAND`` in a process of its own, once ``address`` (family, address) accepts
    connections; stopped after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmkit.cli", *command],
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    family, where = address
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            with socket.socket(family) as probe:
                if probe.connect_ex(where) == 0:
                    break
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(30)


def test_image_chat_answers_prompts_with_and_without_images(llava_model):
    lines = _run("image_chat.py", llava_model).splitlines()
    assert [line.split(",")[0] for line in lines] == ["1 image(s)", "2 image(s)", "0 image(s)"]
    # Each image adds its 36 placeholder tokens to the prompt.
    lengths = [int(line.split(", ")[1].split()[0]) for line in lines]
    assert lengths[0] > 36 and lengths[1] > 72 and lengths[2] < 36


def test_lora_adapters_answer_side_by_side(tiny_model, lora_factory):
    adapters = [f"{name}={lora_factory(name)}" for name in ("attn-r4", "all-r16")]
    lines = _run("lora_adapters.py", tiny_model, *adapters).splitlines()
    assert [line.split(":")[0] for line in lines] == ["base", "attn-r4", "all-r16"]
    assert len({line.split("->")[1] for line in lines}) == 3  # each adapter changes the text
