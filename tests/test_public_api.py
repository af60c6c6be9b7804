"""The public API is small and stable: everything in __all__ resolves, nothing else is promised."""

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import llmkit

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    "AsyncEngine",
    "BeamSearchParams",
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
    "ParamError",
    "PoolingParams",
    "RequestFailedError",
    "RequestOutput",
    "RequestOutputKind",
    "RequestStream",
    "SamplingParams",
    "StructuredOutputsParams",
    "__version__",
    "create_engine",
    "default_model",
}

# The adapters around an engine, each from a short module whose names stay put while the
# folders behind them move.
PUBLIC_MODULES = {
    "llmkit.http": {
        "create_app",
        "AccessOptions",
        "AppOptions",
        "HTTPOptions",
        "RateLimits",
        "ServingOptions",
        "WebSocketOptions",
    },
    "llmkit.unix": {"EngineClient", "serve_unix"},
    "llmkit.replicas": {"ReplicaGroup"},
    "llmkit.websocket": {"WebSocketClient"},
    "llmkit.grpc": {"GrpcServer", "serve_grpc"},
    # Many named models behind one server (create_app(ModelManager(...))).
    "llmkit.models": {
        "Lease",
        "ModelLoadError",
        "ModelManager",
        "ModelNotFoundError",
        "ModelSettings",
        "ModelStatus",
        "parse_keep_alive",
    },
}
# The random-weight model builders, which image_chat.py uses to run without a download.
DEMO_BUILDERS = {"llmkit.model.demo", "llmkit.model.demo_llava"}


def test_all_is_exactly_the_public_api():
    assert set(llmkit.__all__) == EXPECTED


def test_every_public_name_resolves():
    for name in llmkit.__all__:
        assert getattr(llmkit, name) is not None


def test_public_types_and_the_scheduling_package_do_not_import_torch():
    code = (
        "import importlib, pkgutil, sys, llmkit, llmkit.engine.sched as sched\n"
        "for m in pkgutil.iter_modules(sched.__path__, 'llmkit.engine.sched.'):\n"
        "    importlib.import_module(m.name)\n"
        "from llmkit import EngineStats, SamplingParams, EngineConfig, ModelInfo, EngineProtocol\n"
        "from llmkit import LoRARequest\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", sorted(PUBLIC_MODULES))
def test_each_public_module_exports_exactly_its_names(module):
    imported = importlib.import_module(module)
    assert set(imported.__all__) == PUBLIC_MODULES[module]
    for name in imported.__all__:
        assert getattr(imported, name) is not None


def _imported_modules(source: str) -> set[str]:
    tree = ast.parse(source)
    found = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name and name.split(".")[0] == "llmkit"}


def test_examples_the_readme_and_the_docs_import_only_the_public_points():
    allowed = {"llmkit", *PUBLIC_MODULES, *DEMO_BUILDERS}
    used = {}
    for path in sorted((ROOT / "examples").glob("*.py")):
        used[path.name] = _imported_modules(path.read_text())
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
        used[page.name] = set().union(*map(_imported_modules, blocks))
    assert {file: names - allowed for file, names in used.items() if names - allowed} == {}


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
