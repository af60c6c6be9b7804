"""The transports' tests: the OpenAI API suites run against two servers, `llmkit serve MODEL`
with the engine in its process and `llmkit serve --engine-socket` in front of `llmkit engine
MODEL` in another; the other modules run against the first only, to keep the suite's time
down. The servers and clients themselves are fixtures of servers.py."""

from __future__ import annotations

import pytest

from servers import ENGINE_PLACEMENTS

# The OpenAI API suites that run against both placements, unchanged.
BOTH_PLACEMENTS = ("test_openai_api", "test_errors", "test_template_names", "test_beam_search_api")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rpartition(".")[2]
    if "server" in metafunc.fixturenames and module in BOTH_PLACEMENTS:
        metafunc.parametrize("server", list(ENGINE_PLACEMENTS), indirect=True, scope="session")


@pytest.fixture
def anyio_backend() -> str:
    # The openai client's async transport runs on asyncio.
    return "asyncio"
