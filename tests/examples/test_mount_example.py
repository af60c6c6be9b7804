"""examples/mount_in_fastapi_or_starlette.py: a Starlette service with llmkit under /llm."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import openai
import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "mount_in_fastapi_or_starlette.py"


@pytest.fixture
def service(start_process, tiny_model) -> str:
    _, url = start_process(
        lambda port: [sys.executable, str(EXAMPLE), "--model", tiny_model, "--port", str(port)],
        health_path="/llm/health",
    )
    return url


def test_the_mounted_app_serves_beside_the_service_routes(service):
    assert httpx.get(f"{service}/status").json() == {"service": "my-service", "llm_healthy": True}
    client = openai.OpenAI(base_url=f"{service}/llm/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["my-model"]
    chunks = list(
        client.chat.completions.create(
            model="my-model",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=4,
            stream=True,
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert sum(1 for c in chunks if c.choices[0].finish_reason) == 1
