"""GGUF files (llama.cpp's format) as llmkit models: a cached HF-style folder plus the file's
tensors."""
