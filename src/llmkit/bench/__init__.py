"""Benchmarks shipped with llmkit (``llmkit bench``); the serving one needs ``llmkit[bench]``."""
