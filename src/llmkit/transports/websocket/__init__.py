"""The WebSocket endpoint ``/v1/ws`` (endpoint.py), one connection's work (connection.py) and
the Python client (client.py)."""
