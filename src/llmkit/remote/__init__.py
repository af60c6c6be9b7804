"""Engines that run elsewhere, each an EngineProtocol built on the engine's front half.

The unix socket: ``serve_unix`` exposes an engine to local processes and ``EngineClient``
reaches it (``unix_protocol`` and ``unix_data`` are its msgpack wire format, ``framing``
its frames). Ray: ``ReplicaGroup`` runs engine replicas as Ray actors behind one engine.
Apps import them from :mod:`llmkit.unix` and :mod:`llmkit.replicas`.
"""
