"""llmkit workers behind the real smg gateway: the openai client talks to smg, which
tokenizes with the tokenizer it fetched over GetTokenizer and sends token ids to the workers.

Two demo workers: one `llmkit serve demo --grpc` (gRPC only), one `llmkit serve demo
--grpc-port N` (HTTP beside gRPC, one engine), so answers through smg can be compared with
llmkit's own HTTP app on the same engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import openai
import pytest
from smg_grpc_proto import vllm_engine_pb2 as pb
from smg_grpc_proto import vllm_engine_pb2_grpc as pb_grpc

from deadlines import scaled

pytestmark = pytest.mark.skipif(shutil.which("smg") is None, reason="smg is not installed")
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1"}
DEMO = ("--max-model-len", "256", "--log-level", "warning")


def grpc_worker(tools, log: Path, port: int) -> subprocess.Popen:
    """`llmkit serve demo --grpc --port PORT`, returned once its gRPC port answers."""
    with log.open("w") as out:
        command = [*tools.llmkit_command(), "serve", "demo", "--grpc", "--port", str(port), *DEMO]
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=OFFLINE)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=scaled(90))
        except grpc.FutureTimeoutError:
            tools.stop(proc)
            raise RuntimeError(f"no gRPC worker on {port}:\n{log.read_text()}") from None
    return proc


def loads(port: int) -> pb.SchedulerLoad:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return pb_grpc.VllmEngineStub(channel).GetLoads(pb.GetLoadsRequest()).loads[0]


def running(fleet: Fleet) -> int:
    """Requests running on the two workers, as their GetLoads report them."""
    return sum(loads(port).num_running_reqs for port in (fleet.grpc_port, fleet.beside_port))


def settled(fleet: Fleet, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while running(fleet):
        assert time.monotonic() < deadline, "a request still runs after its client left"
        time.sleep(0.05)


class Fleet:
    def __init__(self, tools, root: Path):
        self.tools = tools
        self.grpc_port = tools.free_port()
        self.grpc_only = grpc_worker(tools, root / "grpc-only.log", self.grpc_port)
        self.beside_port = tools.free_port()
        self.beside, self.http_url = tools.serve(
            "demo", root / "beside.log", "--grpc-port", str(self.beside_port), *DEMO, env=OFFLINE
        )
        workers = [f"grpc://127.0.0.1:{p}" for p in (self.grpc_port, self.beside_port)]
        flags = ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(tools.free_port())]
        flags += ["--worker-urls", *workers, "--policy", "round_robin"]
        flags += ["--worker-startup-check-interval", "1"]
        self.gateway, self.url = tools.spawn(
            lambda port: ["smg", "launch", "--host", "127.0.0.1", "--port", str(port), *flags],
            root / "smg.log",
            "/readiness",
            env=OFFLINE,
        )
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="none")
        self.direct = openai.OpenAI(base_url=self.http_url + "/v1", api_key="none")

    def close(self) -> None:
        for proc in (self.gateway, self.beside, self.grpc_only):
            self.tools.stop(proc)


@pytest.fixture(scope="module")
def fleet(process_tools, tmp_path_factory) -> Iterator[Fleet]:
    fleet = Fleet(process_tools, tmp_path_factory.mktemp("fleet"))
    yield fleet
    fleet.close()


MESSAGES = [{"role": "user", "content": "Tell me about gateways."}]


def test_chat_through_smg_equals_llmkits_own_answer(fleet):
    kwargs = {"model": "demo", "messages": MESSAGES, "max_tokens": 12, "temperature": 0}
    own = fleet.direct.chat.completions.create(**kwargs).choices[0]
    for _ in range(2):  # both workers, round robin
        answer = fleet.client.chat.completions.create(**kwargs).choices[0]
        assert answer.message.content == own.message.content
        assert answer.finish_reason == own.finish_reason == "length"
    chunks = list(fleet.client.chat.completions.create(**kwargs, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == own.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_completions_through_smg(fleet):
    kwargs = {"model": "demo", "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0}
    answer = fleet.client.completions.create(**kwargs)
    # smg tokenizes a completion prompt without the BOS that llmkit's app (as vLLM's) adds:
    # given the same ids, llmkit answers the same.
    ids = httpx.post(fleet.http_url + "/tokenize", json=kwargs).json()["tokens"][1:]
    own = fleet.direct.completions.create(**kwargs | {"prompt": ids})
    assert answer.choices[0].text == own.choices[0].text
    assert answer.usage.prompt_tokens == len(ids)
    assert answer.usage.completion_tokens == 10
    streamed = list(fleet.client.completions.create(**kwargs, stream=True))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == own.choices[0].text


def test_json_schema_answer_parses(fleet):
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    answer = fleet.client.chat.completions.create(
        model="demo",
        messages=MESSAGES,
        max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "o", "schema": schema}},
    )
    assert isinstance(json.loads(answer.choices[0].message.content)["ok"], bool)


def running_on_each(fleet: Fleet) -> tuple[int, int]:
    """Two streams started through smg: how many requests each worker runs while they do."""
    long = {"model": "demo", "prompt": "Go on", "max_tokens": 200, "stream": True}
    streams = []
    try:
        for _ in range(2):
            streams.append(fleet.client.completions.create(**long, extra_body={"ignore_eos": True}))
            next(iter(streams[-1]))
        return loads(fleet.grpc_port).num_running_reqs, loads(fleet.beside_port).num_running_reqs
    finally:
        for stream in streams:
            stream.close()
        settled(fleet, timeout=1.0)


def test_round_robin_sends_to_both_workers(fleet):
    assert running_on_each(fleet) == (1, 1)


def test_a_streaming_client_that_leaves_frees_the_worker(fleet):
    body = {"model": "demo", "prompt": "Go on", "max_tokens": 200, "stream": True}
    with httpx.stream("POST", fleet.url + "/v1/completions", json=body | {"ignore_eos": True}) as r:
        next(r.iter_lines())
        assert running(fleet) == 1
    settled(fleet, timeout=1.0)


def test_a_worker_restarted_on_its_port_is_used_again(fleet, tmp_path):
    fleet.tools.stop(fleet.grpc_only)
    fleet.grpc_only = grpc_worker(fleet.tools, tmp_path / "restarted.log", fleet.grpc_port)
    deadline = time.monotonic() + 30
    while True:
        try:
            if running_on_each(fleet) == (1, 1):
                return
        except openai.APIError:
            pass  # smg finds the worker back on its own schedule
        assert time.monotonic() < deadline, "smg did not use the restarted worker again"
        time.sleep(0.5)
