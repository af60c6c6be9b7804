"""Tokenizers kept between engines of one model: a reload takes the one built before, until
the model's files change."""

from __future__ import annotations

import os
import shutil

import pytest

from llmkit import AsyncEngine, EngineConfig
from llmkit.engine.core.tokenizers import Tokenizers
from llmkit.models import ModelManager, ModelSettings


def test_a_folder_s_tokenizer_is_built_once_until_its_files_change(tiny_model, tmp_path):
    folder = shutil.copytree(tiny_model, tmp_path / "model")
    tokenizers = Tokenizers()
    first = tokenizers.get(str(folder))
    assert tokenizers.get(str(folder)) is first
    stat = (folder / "tokenizer.json").stat()
    os.utime(folder / "tokenizer.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    rebuilt = tokenizers.get(str(folder))
    assert rebuilt is not first and rebuilt.encode("hello") == first.encode("hello")


def test_engines_take_the_kept_tokenizer(tiny_model):
    tokenizers = Tokenizers()
    config = EngineConfig(tiny_model, max_model_len=64)
    first, second = (AsyncEngine(config, tokenizers=tokenizers) for _ in range(2))
    assert first.tokenizer is second.tokenizer
    assert AsyncEngine(config).tokenizer is not first.tokenizer  # none given: its own


@pytest.mark.anyio
async def test_a_model_reloaded_by_the_manager_keeps_its_tokenizer(tiny_model):
    models = ModelManager([ModelSettings.of("tiny", tiny_model, max_model_len=64)])
    async with models:
        seen = []
        for _ in range(2):
            async with await models.acquire("tiny") as engine:
                seen.append(engine.tokenizer)
            assert await models.unload("tiny")
        assert seen[0] is seen[1]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
