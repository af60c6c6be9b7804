"""Each wire API's logic without the wire: requests -> engine calls -> responses and chunks.
One folder an API (openai/, anthropic/, ollama/, llamacpp/) on what they share here: the
serving context, errors, prompts, parameters, streams, logprobs, usage, tool choice and
extraction, media, metrics."""
