"""OpenAI's API on the engine: chat, completions, embeddings, score and rerank, tokenize,
models, and the Responses API with its store and stream."""
