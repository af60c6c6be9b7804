"""Who may connect: the server's uid and root by default, others only when allowed (SO_PEERCRED)."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgpack
import pytest

from llmkit.remote.framing import pack
from llmkit.remote.unix.protocol import hello_request
from llmkit.unix import EngineClient, serve_unix

pytestmark = pytest.mark.anyio

NOBODY = 65534
# The other user cannot run this venv's interpreter (it lives under root's home), so its
# client is a stdlib-only script for the system Python: connect, say hello, print the reply.
OTHER_USER_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("refused", exc.errno)
    sys.exit()
s.settimeout(10)
try:
    s.sendall(bytes.fromhex(sys.argv[2]))
except BrokenPipeError:
    pass  # a server that refuses us may have closed already; its answer can still be read
try:
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except OSError as exc:
    print("broken", exc.errno)
    sys.exit()
print("reply", data[4 : 4 + int.from_bytes(data[:4], "big")].hex())
"""


async def test_a_uid_that_is_not_allowed_is_refused(engine, tmp_path):
    path = tmp_path / "strict.sock"
    async with serve_unix(engine, path, allow_same_uid=False, allow_uids=[os.getuid() + 1]):
        with pytest.raises(PermissionError, match=f"uid {os.getuid()} may not use this engine"):
            async with EngineClient(path):
                pass
    async with (
        serve_unix(engine, path, allow_same_uid=False, allow_uids=[os.getuid()]),
        EngineClient(path) as client,
    ):
        assert client.is_healthy()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the other user can reach (pytest's own tmp dirs are private to root)."""
    if os.getuid() != 0:
        pytest.skip("running a client as another user needs root")
    if not shutil.which("python3", path="/usr/bin:/bin"):
        pytest.skip("no system python3 for the other user")
    with tempfile.TemporaryDirectory(prefix="llmkit-uid-") as path:
        os.chmod(path, 0o755)
        yield Path(path)


async def _as_nobody(path: Path) -> tuple[str, object]:
    python = shutil.which("python3", path="/usr/bin:/bin")
    done = await anyio.to_thread.run_sync(
        functools.partial(
            subprocess.run,
            [python, "-c", OTHER_USER_CLIENT, str(path), pack(hello_request()).hex()],
            user=NOBODY,
            capture_output=True,
            text=True,
            timeout=60,
        )
    )
    assert done.returncode == 0, done.stderr
    kind, value = done.stdout.split()
    return kind, msgpack.unpackb(bytes.fromhex(value)) if kind == "reply" else int(value)


async def test_another_uid_is_refused(engine, shared_dir):
    path = shared_dir / "engine.sock"
    async with serve_unix(engine, path):
        # The file's mode (0600) keeps it out before the server hears of it.
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert await _as_nobody(path) == ("refused", 13)  # EACCES
    async with serve_unix(engine, path, allow_uids=[12345]):
        # The file is open to all (0666) so uid 12345 could connect; the peer check refuses nobody.
        assert stat.S_IMODE(path.stat().st_mode) == 0o666
        kind, reply = await _as_nobody(path)
        assert kind == "reply" and reply["error"]["code"] == "permission_denied"
        assert reply["error"]["message"] == f"uid {NOBODY} may not use this engine"


async def test_an_allowed_uid_gets_the_handshake(engine, shared_dir):
    path = shared_dir / "engine.sock"
    async with serve_unix(engine, path, allow_uids=[NOBODY]):
        kind, reply = await _as_nobody(path)
    assert kind == "reply" and reply["type"] == "hello"
    assert reply["model_info"]["name"] == engine.model_info.name
