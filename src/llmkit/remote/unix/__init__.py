"""An engine over a unix socket: ``serve_unix`` (server.py, connection.py), ``EngineClient``
(client.py, client_stream.py, connect.py) and their msgpack wire format (protocol.py,
data.py; the frames in ../framing.py)."""
