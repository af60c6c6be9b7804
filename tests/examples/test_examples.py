"""Each example runs as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_structured_json_prints_parsed_objects(tiny_model):
    out = _run("structured_json.py", tiny_model)
    assert out.count("->") == 3
