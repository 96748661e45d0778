"""Listening sockets for ``--host a,b,...``: several TCP addresses and UNIX socket paths.

Every host is bound here and handed to uvicorn's ``Server.run(sockets=)``: its own config
takes a single host, and a port in use is then reported before anything says it listens. As llama-server: with several TCP
addresses, ``::`` binds IPv6 only, so ``0.0.0.0,::`` does not collide (alone it takes IPv4
too); a host ending in ``.sock`` is a UNIX socket path.
"""

from __future__ import annotations

import os
import socket

__all__ = ["bind_all", "split_hosts", "unsupported"]


def split_hosts(value: str) -> list[str]:
    return [h.strip() for h in value.split(",") if h.strip()]


def unsupported(hosts: list[str], reuse_port: bool) -> str:
    """Why this platform cannot listen as asked (Windows: Python has no AF_UNIX there and
    no SO_REUSEPORT), naming the flag; "" when it can."""
    if reuse_port and not hasattr(socket, "SO_REUSEPORT"):
        return "--reuse-port is not supported on this platform (no SO_REUSEPORT)"
    unix = [h for h in hosts if h.endswith(".sock")]
    if unix and not hasattr(socket, "AF_UNIX"):
        return f"--host {unix[0]}: UNIX socket paths are not supported on this platform"
    return ""


def _bind(host: str, port: int, v6only: bool, reuse_port: bool) -> socket.socket:
    if host.endswith(".sock"):
        if os.path.exists(host):
            os.unlink(host)  # a stale socket file from an earlier run
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(host)
        return sock
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):
        # Windows: SO_REUSEADDR there lets a second server take a port in use; exclusive
        # use is what cpp-httplib (llama-server) sets, and a port in use fails to bind
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
    else:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:  # --reuse-port: several servers share the port, the kernel spreads them
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, int(v6only))
    sock.bind((host, port))
    return sock


def bind_all(hosts: list[str], port: int, reuse_port: bool = False) -> list[socket.socket]:
    """Bind and listen on every host; on failure close what was bound and raise OSError."""
    why = unsupported(hosts, reuse_port)
    if why:  # the CLI refuses these first; a caller that did not still gets an OSError
        raise OSError(why)
    socks: list[socket.socket] = []
    try:
        for host in hosts:
            sock = _bind(host, port, v6only=len(hosts) > 1, reuse_port=reuse_port)
            socks.append(sock)
            sock.listen(2048)
            sock.set_inheritable(True)
    except OSError as e:
        for s in socks:
            s.close()
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    return socks
