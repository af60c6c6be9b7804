"""Many named models behind one server: load on first request, keep-alive, LRU under a budget."""

from llmkit.models.errors import ModelLoadError, ModelNotFoundError
from llmkit.models.keep_alive import parse_keep_alive
from llmkit.models.lease import Lease
from llmkit.models.manager import ModelManager
from llmkit.models.settings import ModelSettings
from llmkit.models.slot import ModelStatus

__all__ = [
    "Lease",
    "ModelLoadError",
    "ModelManager",
    "ModelNotFoundError",
    "ModelSettings",
    "ModelStatus",
    "parse_keep_alive",
]
