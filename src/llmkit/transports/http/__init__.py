"""What every API's HTTP routes share, below them: the app's options, request bodies and
limits, streamed answers, held engine leases, background jobs, middleware, the chat page's
files; create_app (../app.py) puts the routes and these together."""
