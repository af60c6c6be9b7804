"""Many named models behind one server: load on first request, keep-alive, LRU under a budget.
The public import point of :mod:`llmkit.manager`, the package that does it."""

from llmkit.manager.errors import ModelLoadError, ModelNotFoundError
from llmkit.manager.keep_alive import parse_keep_alive
from llmkit.manager.lease import Lease
from llmkit.manager.manager import ModelManager
from llmkit.manager.settings import ModelSettings
from llmkit.manager.slot import ModelStatus

__all__ = [
    "Lease",
    "ModelLoadError",
    "ModelManager",
    "ModelNotFoundError",
    "ModelSettings",
    "ModelStatus",
    "parse_keep_alive",
]
