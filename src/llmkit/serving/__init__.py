"""Transport-independent OpenAI serving: requests -> engine calls -> responses and chunks."""
