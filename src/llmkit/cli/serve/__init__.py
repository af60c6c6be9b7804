"""``llmkit serve``: the command (command.py) and its parts: the server's flags
(server_flags.py: the option classes' fields, made flags by cli/options.py) and the checks
that turn them into the app's and uvicorn's settings (setup.py), the models it serves
(models.py), its sockets (listen.py), draining on SIGTERM (drain.py), gRPC beside or instead of
HTTP (grpc.py)."""

from llmkit.cli.serve.command import add_parser

__all__ = ["add_parser"]
