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
}

# The adapters around an engine, each from a short module whose names stay put while the
# folders behind them move.
PUBLIC_MODULES = {
    "llmkit.http": {
        "create_app",
        "AccessOptions",
        "HTTPOptions",
        "RateLimits",
        "ServingOptions",
        "WebSocketOptions",
    },
    "llmkit.unix": {"EngineClient", "serve_unix"},
    "llmkit.replicas": {"ReplicaGroup"},
    "llmkit.websocket": {"WebSocketClient"},
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


def test_examples_and_the_readme_import_only_the_public_points():
    allowed = {"llmkit", *PUBLIC_MODULES, *DEMO_BUILDERS}
    used = {}
    for path in sorted((ROOT / "examples").glob("*.py")):
        used[path.name] = _imported_modules(path.read_text())
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    used["README.md"] = set().union(*map(_imported_modules, blocks))
    assert {file: names - allowed for file, names in used.items() if names - allowed} == {}
