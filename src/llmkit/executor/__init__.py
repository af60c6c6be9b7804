"""Below the engine: runs the model in this process or on tensor-parallel ranks.

``create_runner`` picks one; engine -> executor -> model, and nothing here imports the engine.
"""
