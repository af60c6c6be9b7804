"""vLLM's engine service over gRPC, for the smg gateway: the server, the service, and the
conversions of its requests, outputs and tokenizer; apps import it from :mod:`llmkit.grpc`."""
