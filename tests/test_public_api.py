"""The public API is small and stable: everything in __all__ resolves, nothing else is promised."""

import llmkit

EXPECTED = {
    "AsyncEngine", "CompletionOutput", "EmbeddingOutput", "EmbeddingRequestOutput",
    "EngineConfig", "EngineDeadError", "EngineStats", "LLM", "LLMKitError", "Logprob",
    "PoolingParams", "RequestFailedError", "RequestOutput", "RequestOutputKind",
    "RequestStream", "SamplingParams", "__version__",
}


def test_all_is_exactly_the_public_api():
    assert set(llmkit.__all__) == EXPECTED


def test_every_public_name_resolves():
    for name in llmkit.__all__:
        assert getattr(llmkit, name) is not None
