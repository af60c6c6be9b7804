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
