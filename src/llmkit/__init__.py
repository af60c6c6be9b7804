"""llmkit."""
