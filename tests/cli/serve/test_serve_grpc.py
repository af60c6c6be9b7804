"""`llmkit serve --grpc`: the API key on the metadata, the drain on SIGTERM (unhealthy first,
new requests refused, the stream in flight finishes, the process exits), a busy port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import grpc
import pytest
from smg_grpc_proto import vllm_engine_pb2 as pb
from smg_grpc_proto import vllm_engine_pb2_grpc as pb_grpc

from deadlines import scaled


def test_sigterm_drains_the_grpc_worker(process_tools, tmp_path):
    port = process_tools.free_port()
    command = [*process_tools.llmkit_command(), "serve", "demo", "--grpc", "--port", str(port)]
    command += ["--api-key", "k", "--max-model-len", "128", "--shutdown-timeout", "30"]
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"}
        )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=scaled(90))
            stub = pb_grpc.VllmEngineStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                stub.HealthCheck(pb.HealthCheckRequest())
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            key = (("authorization", "Bearer k"),)
            assert stub.HealthCheck(pb.HealthCheckRequest(), metadata=key).healthy

            params = pb.SamplingParams(max_tokens=100, ignore_eos=True)
            ids = pb.TokenizedInput(input_ids=[5, 6, 7])
            call = stub.Generate(
                pb.GenerateRequest(
                    request_id="a", tokenized=ids, sampling_params=params, stream=True
                ),
                metadata=key,
            )
            next(call)
            proc.send_signal(signal.SIGTERM)
            health = stub.HealthCheck(pb.HealthCheckRequest(), metadata=key, wait_for_ready=True)
            for _ in range(100):
                if not health.healthy:
                    break
                time.sleep(0.05)
                health = stub.HealthCheck(pb.HealthCheckRequest(), metadata=key)
            assert not health.healthy
            with pytest.raises(grpc.RpcError) as caught:
                list(stub.Generate(pb.GenerateRequest(request_id="b", tokenized=ids), metadata=key))
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "draining" in caught.value.details()
            rest = list(call)
            assert rest[-1].complete.finish_reason == "length"
        assert proc.wait(30) == 0
    finally:
        process_tools.stop(proc)


@pytest.mark.parametrize("flags", [["--grpc", "--port"], ["--port", "0", "--grpc-port"]])
def test_a_busy_grpc_port_fails_before_the_model_loads(process_tools, flags):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        command = [*process_tools.llmkit_command(), "serve", "demo", *flags, port]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().endswith(f"127.0.0.1:{port}: Address already in use")
