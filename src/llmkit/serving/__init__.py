"""Transport-independent OpenAI serving: requests -> engine calls, outputs -> responses and chunks."""
