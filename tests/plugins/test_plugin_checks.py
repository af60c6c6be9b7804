"""Plugins from real installed distributions, each wrong in one way: `llmkit plugins` and
`llmkit serve` refuse them by name before any model loads; a parser that raises fails
only the response it raised on; a name two distributions offer is chosen as dist:name."""

from __future__ import annotations

import json
import subprocess
import sys

import openai
import pytest

from plugin_dists import install_plugin_dists
from tool_helpers import TOOLS

API_KEY = "test-key"
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
DIST = "llmkit-bad-plugins 0.1"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory) -> dict[str, str]:
    return install_plugin_dists(tmp_path_factory.mktemp("plugin-dists"))


def test_plugins_marks_each_unusable_plugin_and_exits_1(plugin_env, llmkit_cmd):
    listing = subprocess.run(
        [*llmkit_cmd, "plugins"], env=plugin_env, capture_output=True, text=True, timeout=60
    )
    assert listing.returncode == 1, listing.stdout + listing.stderr
    lines = listing.stdout.splitlines()
    broken = {line.split()[0]: line for line in lines if "BROKEN" in line}
    assert set(broken) == {"wrong_kind", "jinja_error", "future_api"}
    assert sum("BROKEN" in line and line.split()[0] == "wrong_kind" for line in lines) == 2
    for reason in (
        "it is a function, not a subclass of llmkit.plugin_api.ToolParser",
        "it is a str, not a subclass of llmkit.plugin_api.ReasoningParser",
    ):
        assert any(reason in line and DIST in line for line in lines), reason
    assert "does not compile" in broken["jinja_error"] and DIST in broken["jinja_error"]
    assert "requires llmkit plugin API 99" in broken["future_api"]
    raising = next(line for line in lines if line.split()[0] == "raising")
    assert "BROKEN" not in raising  # it fails only while parsing, below
    chatml = [line for line in lines if line.split()[0] == "chatml"]
    assert len(chatml) == 2
    assert any("use llmkit:chatml" in line for line in chatml)
    assert any("use llmkit-shadow-plugins:chatml" in line for line in chatml)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--enable-auto-tool-choice", "--tool-call-parser", "wrong_kind"], "not a subclass"),
        (["--reasoning-parser", "wrong_kind"], "not a subclass"),
        (["--chat-template", "jinja_error"], "does not compile"),
        (["--enable-auto-tool-choice", "--tool-call-parser", "future_api"], "plugin API 99"),
        (["--chat-template", "chatml"], "choose one as"),
    ],
    ids=["tool-parser", "reasoning-parser", "template", "api-version", "collision"],
)
def test_serve_refuses_a_bad_plugin_in_one_line_before_loading(plugin_env, llmkit_cmd, flags, says):
    started = subprocess.run(
        [*llmkit_cmd, "serve", "demo", *flags], env=plugin_env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert started.returncode != 0
    [line] = started.stderr.strip().splitlines()
    assert line.startswith(f"llmkit: error: {flags[-2]}: ") and says in line
    assert "llmkit-bad-plugins" in line or "llmkit-shadow-plugins" in line


def test_dist_name_picks_a_shadowed_plugin(plugin_env):
    code = (
        "import json; from llmkit.plugin_api import resolve_chat_template as r\n"
        "print(json.dumps([r('llmkit:chatml')[:40], r('llmkit-shadow-plugins:chatml')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=plugin_env, capture_output=True, text=True, check=True
    )
    builtin, shadow = json.loads(out.stdout)
    assert builtin.startswith("{%- macro text(content)") and shadow.startswith("SHADOW")


def test_a_parser_that_raises_fails_only_its_response(plugin_env, module_server, tiny_model):
    server = module_server(
        tiny_model, "--enable-auto-tool-choice", "--tool-call-parser", "raising",
        "--served-model-name", "tiny", "--api-key", API_KEY, "--log-level", "warning",
        env=plugin_env,
    )  # fmt: skip
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
    ask = dict(model="tiny", messages=USER, tools=TOOLS, max_tokens=8)
    with pytest.raises(openai.InternalServerError) as err:
        client.chat.completions.create(**ask)
    assert "tool parser plugin 'raising'" in err.value.body["message"]
    assert "kaboom in the plugin" in err.value.body["message"]
    with pytest.raises(openai.APIError, match="tool parser plugin 'raising'"):
        for _ in client.chat.completions.create(stream=True, **ask):
            pass
    answer = client.chat.completions.create(model="tiny", messages=USER, max_tokens=4)
    assert answer.choices[0].finish_reason in ("stop", "length")
    assert "tool parser plugin 'raising'" in server.log.read_text()
