"""Engines that run elsewhere, each an EngineProtocol built on the engine's front half.

The unix socket (unix/): ``serve_unix`` exposes an engine to local processes and
``EngineClient`` reaches it (``framing`` its frames). gRPC (grpc/): vLLM's engine service for
the smg gateway. Ray: ``ReplicaGroup`` runs engine replicas as Ray actors behind one engine.
Apps import them from :mod:`llmkit.unix`, :mod:`llmkit.grpc` and :mod:`llmkit.replicas`.
"""
