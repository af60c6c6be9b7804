"""Where `llmkit serve` listens: a unix socket (--uds), and an address already taken fails at
once, with one line, before any model loads."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deadlines import Deadline, scaled


def serve_fails(command: list[str]) -> str:
    """Run a `llmkit serve` that must fail: its stderr. One line of it says that it failed
    before the model loaded: a load logs its own lines first (timing it flaked on a busy
    machine, where torch's import alone can take seconds)."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=scaled(60))
    assert result.returncode == 1, result.stderr
    return result.stderr


def test_a_busy_port_fails_at_once_with_one_line(llmkit_cmd, tiny_model):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stderr = serve_fails([*llmkit_cmd, "serve", tiny_model, "--port", str(port)])
    assert stderr.splitlines() == [
        f"llmkit serve: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


@pytest.fixture
def uds_server(llmkit_cmd, tiny_model, tmp_path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """`llmkit serve --uds PATH`, once it answers there; its process and PATH."""
    path = tmp_path / "llmkit.sock"
    with (tmp_path / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [*llmkit_cmd, "serve", tiny_model, "--uds", str(path)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = Deadline(90, f"llmkit serve --uds to answer on {path}")
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as http:
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            assert not deadline.passed(), deadline.error()
            try:
                if http.get("http://llmkit/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
    yield proc, path
    proc.kill()
    proc.wait()


def test_serve_on_a_unix_socket_and_a_second_server_there_fails_at_once(
    uds_server, llmkit_cmd, tiny_model
):
    proc, path = uds_server
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), timeout=30) as http:
        answer = http.post("http://llmkit/v1/completions", json={"prompt": "hi", "max_tokens": 3})
    assert answer.json()["usage"]["completion_tokens"] == 3
    stderr = serve_fails([*llmkit_cmd, "serve", tiny_model, "--uds", str(path)])
    assert stderr.splitlines() == [
        f"llmkit serve: error: cannot listen on {path}: Address already in use"
    ]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
