"""llama-server's native endpoints on the engine: /infill (code completion)."""
