"""An engine over a unix socket: ``serve_unix(engine, path)`` and ``EngineClient(path)``.

The stable import point for apps; ``EngineClient`` implements the same engine protocol as
``AsyncEngine``, for an engine in another local process.
"""

from llmkit.remote.unix.client import EngineClient
from llmkit.remote.unix.server import serve_unix

__all__ = ["EngineClient", "serve_unix"]
