"""The public API is small and stable: everything in __all__ resolves, nothing else is promised."""

import subprocess
import sys

import llmkit

EXPECTED = {
    "AsyncEngine",
    "CompletionOutput",
    "EmbeddingOutput",
    "EmbeddingRequestOutput",
    "EngineConfig",
    "EngineDeadError",
    "EngineNotStartedError",
    "EngineOverloadedError",
    "EngineProtocol",
    "EngineStats",
    "LLM",
    "LLMKitError",
    "Logprob",
    "LoRARequest",
    "ModelInfo",
    "PoolingParams",
    "RequestFailedError",
    "RequestOutput",
    "RequestOutputKind",
    "RequestStream",
    "SamplingParams",
    "__version__",
    "default_model",
}


def test_all_is_exactly_the_public_api():
    assert set(llmkit.__all__) == EXPECTED


def test_every_public_name_resolves():
    for name in llmkit.__all__:
        assert getattr(llmkit, name) is not None


def test_public_types_and_the_scheduler_do_not_import_torch():
    code = (
        "import sys, llmkit, llmkit.engine.scheduler, llmkit.engine.kv_cache, llmkit.engine.stop\n"
        "from llmkit import EngineStats, SamplingParams, EngineConfig, ModelInfo, EngineProtocol\n"
        "from llmkit import LoRARequest\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# What a plugin may import (llmkit.plugin_api.__all__): changing it is changing the API.
PLUGIN_API = set(
    """CHAT_TEMPLATES PLUGIN_API_VERSION REASONING_PARSERS TOOL_PARSERS CallObject Malformed
    MarkedParser MarkerParser ReasoningParser ReasoningStream Scan ScannedCall ThinkParser
    ToolCall ToolCallDelta ToolCallStream ToolParser Truncated close_json cut_marker expect
    extract_tool_calls load_plugin partial_marker read_call_object resolve_chat_template
    safe_prefix skip_ws string_end value_end""".split()
)


def test_the_plugin_api_is_exactly_what_it_declares():
    import llmkit.plugin_api
    import llmkit.testing

    assert set(llmkit.plugin_api.__all__) == PLUGIN_API
    assert llmkit.plugin_api.PLUGIN_API_VERSION == 1
    for module in (llmkit.plugin_api, llmkit.testing):
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_the_example_plugins_import_only_the_plugin_api():
    """What an outside plugin may import, the example shows: nothing but llmkit.plugin_api."""
    import ast
    from pathlib import Path

    root = Path(__file__).parents[1] / "plugins" / "llmkit-example-plugins" / "src"
    imported = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    assert {m for m in imported if m.split(".")[0] == "llmkit"} == {"llmkit.plugin_api"}
