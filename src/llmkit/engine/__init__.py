"""The engine: AsyncEngine, LLM and the core they drive; EngineProtocol is its public surface."""
