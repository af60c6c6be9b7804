"""The core thread: ``EngineCore.step()`` (schedule -> execute -> sample -> update), sequence
state, the LoRA store, the encoder cache, outputs as the core writes them. It never imports
the caller's side (``llmkit.engine``'s top level)."""
