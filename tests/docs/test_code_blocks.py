"""Every code block in README.md and docs/ runs.

Python blocks are executed: a page's blocks in order, in one namespace, top-level ``await``
allowed. Shell blocks' ``llmkit`` commands are parsed by the CLI's own parser (they start
servers that run until stopped), so a flag the CLI lost or renamed fails here. A block that
needs something running names it in an HTML comment before its fence, which the test
provides:

- ``<!-- test: server -->``: ``llmkit serve demo`` where the block says 127.0.0.1:8000,
  and ``key``, its API key (none);
- ``<!-- test: socket -->``: ``llmkit engine demo`` on the socket the block names;
- ``<!-- test: engine -->``: ``engine``, a started AsyncEngine on the demo model; the
  address 127.0.0.1:50051 becomes a free port, and a block that serves on it until stopped
  is stopped once the port accepts connections;
- ``<!-- test: lora -->``: a tiny Llama at ``path/to/llama`` and an adapter of rank 16 at
  ``path/to/sql-adapter``;
- ``<!-- test: ray -->``: a local Ray cluster the block's replicas join (stopped, with them,
  after the module).

Other blocks (a wire format's messages, the browser module, the layout) are prose.
"""

from __future__ import annotations

import ast
import re
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from llmkit import AsyncEngine, EngineConfig
from llmkit.cli import build_parser
from servers import start_engine, stop

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(
    r"(?:<!-- test: (?P<needs>[\w-]+) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S
)


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    needs: str | None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, text[: m.start()].count("\n") + 1, m["lang"], m["code"], m["needs"])
        for m in FENCE.finditer(text)
    ]


ALL = [b for page in PAGES for b in blocks(page)]
PYTHON_PAGES = sorted({b.page for b in ALL if b.lang == "python"})
SHELL = [b for b in ALL if b.lang in ("bash", "sh")]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def commands(code: str) -> list[list[str]]:
    """Each ``llmkit ...`` command of a shell block, continuation lines joined, a trailing
    ``&`` dropped; commands chained with ``&&`` taken one by one."""
    found = []
    for line in code.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words and words[-1] == "&":
                words = words[:-1]
            if words and words[0] == "llmkit":
                found.append(words[1:])
    return found


def _refused(argv: list[str]) -> bool:
    try:
        build_parser().parse_args(argv)
    except SystemExit:
        return True
    return False


@pytest.mark.parametrize("block", SHELL, ids=[f"{_name(b.page)}:{b.line}" for b in SHELL])
def test_shell_blocks_llmkit_commands_parse(block):
    refused = [shlex.join(argv) for argv in commands(block.code) if _refused(argv)]
    assert refused == [], f"{_name(block.page)}:{block.line}: the CLI refuses these"


def test_every_page_has_its_blocks_found():
    """The README's two commands and its example, at least; no fence left unread."""
    readme = [b for b in ALL if b.page.name == "README.md"]
    assert [b.lang for b in readme] == ["bash", "bash", "python"]
    for page in PAGES:
        assert page.read_text().count("```") == 2 * len(blocks(page)), _name(page)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _connects(port: int) -> bool:
    try:
        stream = await anyio.connect_tcp("127.0.0.1", port)
    except OSError:
        return False
    await stream.aclose()
    return True


async def _accepts(port: int) -> None:
    while not await _connects(port):
        await anyio.sleep(0.05)


class Provider:
    """What the blocks of one page need, started once and stopped with the page."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path):
        self.request = request
        self.tmp_path = tmp_path
        self.subs: dict[str, dict[str, str]] = {}
        self.names: dict[str, Any] = {}

    def prepare(self, needs: str | None) -> dict[str, str]:
        if needs is None or needs == "engine":
            return {"127.0.0.1:50051": f"127.0.0.1:{_free_port()}"} if needs else {}
        if needs not in self.subs:
            self.subs[needs] = getattr(self, f"_{needs}")()
        return self.subs[needs]

    def _server(self) -> dict[str, str]:
        start = self.request.getfixturevalue("start_server")
        _, url = start("demo")
        self.names["key"] = None
        return {"127.0.0.1:8000": url.removeprefix("http://")}

    def _socket(self) -> dict[str, str]:
        path = self.tmp_path / "engine.sock"
        proc = start_engine("demo", path, self.tmp_path / "engine.log")
        self.request.addfinalizer(lambda: stop(proc))
        return {"/tmp/llmkit.sock": str(path)}

    def _ray(self) -> dict[str, str]:
        self.request.getfixturevalue("ray_cluster")  # ray.init: ReplicaGroup joins it
        return {}

    def _lora(self) -> dict[str, str]:
        adapter = self.request.getfixturevalue("lora_factory")("all-r16")
        base = self.request.getfixturevalue("tiny_model")
        return {'"path/to/llama"': repr(base), '"path/to/sql-adapter"': repr(adapter)}


def _run(
    where: str, code: str, namespace: dict[str, Any], needs: str | None, port: str | None
) -> None:
    """``code`` run; a traceback names ``where`` (the page and the block's line) as its file."""
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

    async def main() -> None:
        if needs != "engine":
            result = eval(compiled, namespace)
            if result is not None:
                await result
            return
        async with AsyncEngine(EngineConfig("demo")) as engine:
            namespace["engine"] = engine
            async with anyio.create_task_group() as tg:

                async def block() -> None:
                    result = eval(compiled, namespace)
                    if result is not None:
                        await result
                    tg.cancel_scope.cancel()

                tg.start_soon(block)
                await _accepts(int(port.rsplit(":", 1)[1]))  # serving: enough
                tg.cancel_scope.cancel()

    anyio.run(main)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[_name(p) for p in PYTHON_PAGES])
def test_python_blocks_run(page, request, tmp_path, capsys):
    provider = Provider(request, tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.lang != "python":
            continue
        subs = provider.prepare(block.needs)
        namespace.update(provider.names)
        code = block.code
        for old, new in subs.items():
            code = code.replace(old, new)
        where = f"{_name(page)}:{block.line}"
        _run(where, code, namespace, block.needs, subs.get("127.0.0.1:50051"))
