"""Start ``llmkit serve`` on a free port for a benchmark run, and wait until it is healthy."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import IO

import httpx

from llmkit.errors import LLMKitError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    model: str | None, flags: list[str], timeout: float = 300.0, log: IO[bytes] | None = None
) -> tuple[subprocess.Popen, str]:
    """``llmkit serve MODEL FLAGS`` on a free port; the process and its base URL, once healthy.
    No ``model``: the flags name the models (``--model NAME=PATH``).

    ``log``: a file for the server's output (default: this process's).
    """
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "llmkit.cli",
        "serve",
        *([model] if model else []),
        "--port",
        str(port),
        "--log-level",
        "warning",
        *flags,
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT if log else None)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LLMKitError(f"llmkit serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    raise TimeoutError("llmkit serve did not become healthy in time")
