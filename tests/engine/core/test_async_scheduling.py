"""Async scheduling: a step queued before the host reads the previous one's tokens gives
exactly the outputs of steps run one at a time (tokens, text, stops, logprobs, seeds).

CPU runs it when asked (``async_scheduling=True``), CUDA by default; on a GPU machine
these tests run on the GPU (``device`` is auto), in float32 and with a fixed cache so
that several engines share the GPU.
"""

from __future__ import annotations

import anyio
import pytest
import transformers

from llmkit import LLM, AsyncEngine, EngineConfig, SamplingParams
from llmkit.engine.core.finish import StepFinisher
from llmkit.engine.core.launch import Launcher

ARCHS = ["llama", "mistral", "qwen2", "qwen3"]
ENGINE = dict(max_model_len=512, dtype="float32", max_num_seqs=16)
LENGTHS = [3, 7, 15, 33, 64, 100, 180]


def _prompts(path: str, lengths=LENGTHS) -> list[list[int]]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    words = "the engine serves a batch of prompts while the cache keeps every block".split()
    text = " ".join(words[j % len(words)] for j in range(max(lengths) + 20))
    ids = tokenizer.encode(text, add_special_tokens=False)
    return [ids[i : i + n] for i, n in enumerate(lengths)]


def _summary(outputs) -> list:
    """Everything a reader sees of each output, logprobs rounded past float noise."""
    return [
        [
            (
                c.text,
                c.token_ids,
                c.finish_reason,
                c.stop_reason,
                [{t: round(lp.logprob, 4) for t, lp in e.items()} for e in c.logprobs or []],
            )
            for c in out.outputs
        ]
        for out in outputs
    ]


def _both(path: str, prompts, params, **kwargs) -> tuple[list, list, LLM]:
    """The outputs of steps one at a time, then async; returns the async LLM too."""
    # No prompt cache below the pool: the second engine would find what the first left.
    kwargs = {"num_kv_blocks": 256, "prompt_cache_gib": 0, **ENGINE, **kwargs}
    with LLM(path, async_scheduling=False, **kwargs) as llm:
        sync = _summary(llm.generate(prompts, params, use_tqdm=False))
    llm = LLM(path, async_scheduling=True, **kwargs)
    assert llm._core.async_scheduling
    return sync, _summary(llm.generate(prompts, params, use_tqdm=False)), llm


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_tokens_equal_with_chunks_and_preemption(model_factory, arch):
    path = model_factory(arch)
    greedy = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    # Small chunks admit many prompts at once; their growth then runs the pool dry.
    sync, async_, llm = _both(
        path, _prompts(path), greedy, num_kv_blocks=24, max_num_batched_tokens=32
    )
    assert async_ == sync
    stats = llm.stats()
    assert stats.num_preemptions > 0
    assert stats.kv_blocks_free == 24 and stats.num_running == 0
    assert not llm._core.has_work()
    llm.close()


def test_stops_lengths_logprobs_and_seeds_are_exact(tiny_model):
    prompts = _prompts(tiny_model)
    base = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
    with LLM(tiny_model, num_kv_blocks=256, async_scheduling=False, **ENGINE) as llm:
        free = llm.generate(prompts, base, use_tqdm=False)
    # Stops that bite mid-stream: a string from each free-running text, a token id.
    params = []
    for i, out in enumerate(free):
        comp = out.outputs[0]
        kind = i % 4
        stop = comp.text[len(comp.text) // 2 :][:3]
        if kind == 0 or (kind == 1 and not stop):
            params.append(SamplingParams(temperature=0.0, max_tokens=i + 1, ignore_eos=True))
        elif kind == 1:
            params.append(
                SamplingParams(temperature=0.0, max_tokens=16, stop=[stop], ignore_eos=True)
            )
        elif kind == 2:
            params.append(
                SamplingParams(
                    temperature=0.0,
                    max_tokens=16,
                    stop_token_ids=[comp.token_ids[5]],
                    ignore_eos=True,
                    logprobs=3,
                )
            )
        else:
            params.append(SamplingParams(temperature=0.9, seed=i, n=2, max_tokens=9, logprobs=2))
    sync, async_, llm = _both(tiny_model, prompts, params)
    assert async_ == sync
    reasons = {c[2] for out in sync for c in out}
    assert reasons == {"stop", "length"}  # the stops did bite
    assert [len(c[1]) for c in async_[0]] == [1]  # max_tokens=1 exactly
    llm.close()


def test_requests_that_need_their_tokens_on_the_host_run_beside_async_ones(tiny_model):
    prompts = _prompts(tiny_model)
    # The host-bound ones end early, so the plain ones go on to run ahead again.
    plain = SamplingParams(temperature=0.0, max_tokens=20, ignore_eos=True)
    host_bound = [
        SamplingParams(temperature=0.0, max_tokens=4, repetition_penalty=1.3),
        SamplingParams(temperature=0.0, max_tokens=8, min_tokens=6, stop_token_ids=[5]),
        SamplingParams(temperature=0.0, max_tokens=3, frequency_penalty=0.7),
    ]
    params = [host_bound[i // 2] if i % 2 else plain for i in range(len(prompts))]
    sync, async_, llm = _both(tiny_model, prompts, params)
    assert async_ == sync
    llm.close()


def test_a_step_is_queued_before_the_previous_ones_tokens_are_read(tiny_model, monkeypatch):
    """The host runs ahead: with two steps' work, one step is launched while another is in
    flight, and every launched step is finished exactly once."""
    events: list[tuple[str, object]] = []  # the steps themselves: ids of dead ones recur
    launch, finish = Launcher.launch, StepFinisher.finish

    def traced_launch(self, *args):
        launched = launch(self, *args)
        events.append(("launch", launched))
        return launched

    def traced_finish(self, launched):
        events.append(("finish", launched))
        return finish(self, launched)

    monkeypatch.setattr(Launcher, "launch", traced_launch)
    monkeypatch.setattr(StepFinisher, "finish", traced_finish)
    llm = LLM(tiny_model, num_kv_blocks=256, async_scheduling=True, **ENGINE)
    llm.generate(_prompts(tiny_model)[:2], SamplingParams(max_tokens=5), use_tqdm=False)
    launched = [id(step) for kind, step in events if kind == "launch"]
    finished = [id(step) for kind, step in events if kind == "finish"]
    assert sorted(launched) == sorted(finished) and len(set(finished)) == len(finished)
    unread: set[int] = set()
    ahead = 0  # launches made while an earlier step's tokens were unread
    for kind, step in events:
        if kind == "launch":
            ahead += bool(unread)
            unread.add(id(step))
        else:
            unread.remove(id(step))
    assert ahead >= 3, events
    llm.close()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


@pytest.mark.anyio
async def test_leaving_the_loop_aborts_with_a_step_in_flight(tiny_model):
    config = EngineConfig(tiny_model, num_kv_blocks=256, async_scheduling=True, **ENGINE)
    long = SamplingParams(temperature=0.0, max_tokens=300, ignore_eos=True)
    short = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    prompts = _prompts(tiny_model)[:3]
    with LLM(tiny_model, num_kv_blocks=256, async_scheduling=False, **ENGINE) as llm:
        expected = [o.outputs[0].token_ids for o in llm.generate(prompts, short, use_tqdm=False)]
    async with AsyncEngine(config) as engine:
        results: dict[int, list[int]] = {}

        async def run(i: int) -> None:
            async for out in engine.generate({"prompt_token_ids": prompts[i]}, short):
                results[i] = out.outputs[0].token_ids

        async def abandon() -> None:
            seen = 0
            async for _ in engine.generate({"prompt_token_ids": prompts[0]}, long):
                seen += 1
                if seen == 3:
                    break

        async with anyio.create_task_group() as tg:
            tg.start_soon(abandon)
            for i in range(3):
                tg.start_soon(run, i)
        assert [results[i] for i in range(3)] == expected
        with anyio.fail_after(30):
            while True:
                s = engine.stats()
                if s.num_running == 0 and s.kv_blocks_free == s.kv_blocks_total:
                    break
                await anyio.sleep(0.01)
