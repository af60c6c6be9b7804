"""vLLM's gRPC engine service for the smg gateway: ``serve_grpc(engine, "host:port")``.

The stable import point for apps (extra: ``llmkit[grpc]``); the service lives in
``llmkit.transports``, which may change, this module's names do not.
"""

from llmkit.remote.grpc.server import GrpcServer, serve_grpc

__all__ = ["GrpcServer", "serve_grpc"]
