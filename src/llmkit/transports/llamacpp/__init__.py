"""llama-server's native endpoints editors call (/infill), beside OpenAI's on the same app."""

from llmkit.transports.llamacpp.endpoints import LLAMACPP
from llmkit.transports.llamacpp.routes import LlamaCppRoutes

__all__ = ["LLAMACPP", "LlamaCppRoutes"]
