"""An engine over a unix socket: ``serve_unix(engine, path)`` and ``EngineClient(path)``.

The stable import point for apps; ``EngineClient`` implements the same engine protocol as
``AsyncEngine``, for an engine in another local process.
"""

from llmkit.transports.unix import serve_unix
from llmkit.transports.unix_client import EngineClient

__all__ = ["EngineClient", "serve_unix"]
