"""An example of llmkit plugins: a tool-call parser, a chat template, a reasoning parser."""
