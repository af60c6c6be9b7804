"""The sockets ``llmkit serve`` listens on, bound before the model loads: a busy port fails
at once rather than after the load."""

from __future__ import annotations

import errno
import os
import socket
import stat


def bind_sockets(host: str, port: int, uds: str | None) -> list[socket.socket]:
    """Sockets bound to the unix socket ``uds``, or to each address of ``host`` at ``port``
    (as asyncio's ``create_server`` binds them); SystemExit with one line if one is taken.

    They do not listen yet (:func:`listen`, once the model is loaded): until then a client
    is refused at once rather than left waiting.
    """
    try:
        return [_bind_unix(uds)] if uds else _bind_tcp(host, port)
    except OSError as exc:
        where = uds or (f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        raise SystemExit(
            f"llmkit serve: error: cannot listen on {where}: {exc.strerror or exc}"
        ) from None


def listen(sockets: list[socket.socket], backlog: int) -> None:
    """Start listening; SystemExit with one line if another server took an address since
    it was bound (two servers started at once on one port both bind it, one listens)."""
    try:
        for sock in sockets:
            sock.listen(backlog)
    except OSError as exc:
        raise SystemExit(
            f"llmkit serve: error: cannot listen on {listening_url(sock, tls=False)}: "
            f"{exc.strerror or exc} (another server took it while the model loaded)"
        ) from None


def listening_url(sock: socket.socket, tls: bool) -> str:
    """Where clients reach ``sock``: ``http://host:port`` (or https), or the socket's path."""
    if sock.family == socket.AF_UNIX:
        return f"unix socket {sock.getsockname()}"
    host, port = sock.getsockname()[:2]
    return f"{'https' if tls else 'http'}://{f'[{host}]' if ':' in host else host}:{port}"


def _bind_tcp(host: str, port: int) -> list[socket.socket]:
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            # As asyncio does: a restart may reuse the port its connections still hold.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bind_unix(path: str) -> socket.socket:
    if os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode):
        with socket.socket(socket.AF_UNIX) as probe:
            if probe.connect_ex(path) == 0:
                raise OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))
        os.unlink(path)  # left by a server that is gone
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o666)  # as uvicorn leaves it
    except OSError:
        sock.close()
        raise
    return sock
