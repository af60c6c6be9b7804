"""``/openapi.json``: the document (document.py) from the endpoint table, and the request
schemas of each API fitted to what the server accepts."""
