"""``llmkit serve``: the command (command.py) and its parts: the server's flags
(server_flags.py) and their wiring into the app's options (setup.py), the models it serves
(models.py), its sockets (listen.py), draining on SIGTERM (drain.py), gRPC beside or instead of
HTTP (grpc.py)."""

from llmkit.cli.serve.command import add_parser

__all__ = ["add_parser"]
