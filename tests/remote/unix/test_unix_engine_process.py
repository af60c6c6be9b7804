"""`llmkit engine` in a process of its own: clients reach it, and hear promptly when it dies."""

from __future__ import annotations

import signal
import subprocess

import anyio
import pytest

from deadlines import scaled
from llmkit import EngineDeadError, SamplingParams
from llmkit.unix import EngineClient

pytestmark = pytest.mark.anyio

LONG = SamplingParams(temperature=0, max_tokens=480, ignore_eos=True)


async def test_killing_the_engine_process_fails_every_reader_within_2_s(engine_process):
    proc, path = engine_process
    async with EngineClient(path) as client:
        streams = [client.generate(f"Story {i}:", LONG) for i in range(8)]
        for stream in streams:
            assert not (await stream.__anext__()).finished
        failed_at: list[float] = []

        async def read(stream) -> None:
            with pytest.raises(EngineDeadError):
                async for _ in stream:
                    pass
            failed_at.append(anyio.current_time())

        with anyio.fail_after(scaled(10)):
            async with anyio.create_task_group() as tg:
                for stream in streams:
                    tg.start_soon(read, stream)
                killed_at = anyio.current_time()
                proc.send_signal(signal.SIGKILL)
        assert len(failed_at) == 8 and max(failed_at) - killed_at < 2.0
        assert not client.is_healthy()
        with pytest.raises(EngineDeadError):
            client.generate("anyone there?")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a process start is slow; one loop will do
async def test_sigterm_stops_the_engine_and_removes_its_socket(engine_process):
    proc, path = engine_process
    async with EngineClient(path) as client:
        stream = client.generate("Hello", LONG)
        await stream.__anext__()
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(scaled(10)), pytest.raises(EngineDeadError):
            async for _ in stream:
                pass
    assert await anyio.to_thread.run_sync(proc.wait, scaled(20)) == 0
    assert not path.exists()


def test_serve_with_an_engine_socket_takes_no_model_and_says_when_none_answers(
    llmkit_cmd, tmp_path
):
    def serve(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*llmkit_cmd, "serve", *args], capture_output=True, text=True, timeout=scaled(120)
        )

    for args in (
        ["demo", "--engine-socket", "x.sock"],
        ["--engine-socket", "x.sock", "--block-size", "8"],
    ):
        done = serve(*args)
        assert done.returncode != 0 and "belong to `llmkit engine`" in done.stderr
    done = serve("--engine-socket", str(tmp_path / "none.sock"))
    assert (
        done.returncode != 0
        and "cannot reach the engine" in done.stderr
        and "Traceback" not in done.stderr
    )
