"""The OpenAI API (HTTP + Server-Sent Events), and vLLM's endpoints beside it."""
