"""The OpenAI Agents SDK's default model (the Responses API) running an agent with a
function tool against a real `llmkit serve`."""

from __future__ import annotations

from typing import Literal

import openai
import pytest

agents = pytest.importorskip("agents")

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def roomy_server(module_server, tiny_model):
    """A context long enough for the SDK's strict tool schema and instructions."""
    return module_server(tiny_model, "--max-model-len", "1024", "--served-model-name", "tiny")


async def test_an_agent_calls_its_function_tool(roomy_server):
    calls = []

    @agents.function_tool
    def get_weather(city: Literal["Paris", "Oslo"]) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"Sunny in {city}"

    client = openai.AsyncOpenAI(base_url=roomy_server.base_url, api_key="none", max_retries=0)
    agent = agents.Agent(
        name="weather",
        instructions="Answer with the weather.",
        model=agents.OpenAIResponsesModel(model="tiny", openai_client=client),
        tools=[get_weather],
        # The random demo model calls the tool only when made to; the run ends with its result.
        model_settings=agents.ModelSettings(
            tool_choice="required", max_tokens=300, parallel_tool_calls=False
        ),
        tool_use_behavior="stop_on_first_tool",
    )
    result = await agents.Runner.run(
        agent, "Weather in Paris?", run_config=agents.RunConfig(tracing_disabled=True)
    )
    await client.close()
    assert calls and calls[0] in ("Paris", "Oslo")
    assert result.final_output == f"Sunny in {calls[0]}"
