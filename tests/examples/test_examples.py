"""Each example runs as a user would run it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
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
    engine = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llmkit.cli",
            "engine",
            tiny_model,
            "--socket",
            str(path),
            "--log-level",
            "warning",
        ],
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    try:
        deadline = time.monotonic() + 120
        while engine.poll() is None and time.monotonic() < deadline:
            with socket.socket(socket.AF_UNIX) as probe:
                if probe.connect_ex(str(path)) == 0:
                    break
            time.sleep(0.1)
        out = _run("unix_client.py", str(path))
    finally:
        engine.terminate()
        engine.wait(30)
    lines = out.splitlines()
    assert lines[0] == f"connected to {tiny_model} (max_model_len 2048)"
    assert {"[a]", "[b]"} <= {line.split()[0] for line in lines[1:-1]}
    assert lines[-1].startswith("the engine has generated ")


def test_structured_json_prints_parsed_objects(tiny_model):
    out = _run("structured_json.py", tiny_model)
    assert out.count("->") == 3
