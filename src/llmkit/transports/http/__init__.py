"""The HTTP app (``create_app`` in app.py) and what every API's routes share: its options,
request bodies and limits, streamed answers, held engine leases, background jobs, middleware,
the chat page's files."""
