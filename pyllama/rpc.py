"""llama.cpp's RPC backend: one model spread over several machines.

``pyllama-rpc-server`` (``python -m pyllama.rpc``) serves this machine's devices over TCP,
as llama.cpp's ``rpc-server`` does, with the same flags and protocol: llama-server and
pyllama-server use either. ``pyllama-server --rpc host:port,...`` adds those machines'
devices, which ``-ngl`` and ``--tensor-split`` then spread the model over.

The protocol has no authentication and no encryption: whoever reaches the port can run
graphs on the devices and read their memory. The server binds 127.0.0.1 unless ``--host``
says otherwise, and says so loudly when it does.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["add_servers", "main", "parse_endpoints"]

DEFAULT_PORT = 50052
_WARNING = """
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
WARNING: Host ('{host}') is != '127.0.0.1'
         Never expose the RPC server to an open network!
         This is an experimental feature and is not secure!
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
"""


def parse_endpoints(value: str) -> list[str]:
    """``host:port,host:port`` as --rpc takes it; ValueError naming a malformed one."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"'{item}' is not host:port")
        out.append(item)
    if not out:
        raise ValueError("no RPC servers specified")
    return out


def _answers(endpoint: str, timeout: float = 5.0) -> str | None:
    """Why ``endpoint`` cannot be reached, or None. ggml aborts the whole process when it
    cannot connect, so each server is tried here first."""
    host, _, port = endpoint.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or str(e)


def add_servers(endpoints: Sequence[str]) -> list[str]:
    """Add each rpc-server's devices to this process (before a model loads); returns the
    devices' names (RPC0, RPC1 ...). RuntimeError when one cannot be reached."""
    from pyllama import _core

    names: list[str] = []
    for endpoint in endpoints:
        why = _answers(endpoint)
        if why is not None:
            raise RuntimeError(f"cannot connect to RPC server {endpoint}: {why}")
        names += _core.rpc_add_server(endpoint)
    return names


def _cache_dir() -> Path:
    """rpc-server's: $LLAMA_CACHE, else $XDG_CACHE_HOME or ~/.cache (Windows:
    %LOCALAPPDATA%), then llama.cpp/rpc."""
    if os.environ.get("LLAMA_CACHE"):
        return Path(os.environ["LLAMA_CACHE"])
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~/.cache")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "llama.cpp" / "rpc"


def _parser() -> argparse.ArgumentParser:
    threads = max(1, (os.cpu_count() or 2) // 2)
    p = argparse.ArgumentParser(
        prog="pyllama-rpc-server",
        description="Serve this machine's devices to llama.cpp's RPC backend (rpc-server).",
        allow_abbrev=False,
    )
    p.add_argument("-t", "--threads", type=int, default=threads, help="CPU device threads")
    p.add_argument("-d", "--device", help="comma-separated list of devices")
    p.add_argument("-H", "--host", default="127.0.0.1", help="host to bind to")
    p.add_argument("-p", "--port", type=int, default=DEFAULT_PORT, help="port to bind to")
    p.add_argument("-c", "--cache", action="store_true", help="enable local file cache")
    return p


def _devices(wanted: str | None) -> list[str]:
    """rpc-server's choice: the named devices; else every GPU; else the CPU."""
    from pyllama.hardware import devices

    found = devices()
    if wanted:
        names = [n.strip() for n in wanted.split(",") if n.strip()]
        known = {d.name for d in found}
        for name in names:
            if name not in known:
                raise ValueError(f"unknown device: {name} (available: {', '.join(sorted(known))})")
        return names
    gpus = [d.name for d in found if d.type not in ("cpu", "accel")]
    return gpus or [d.name for d in found if d.type == "cpu"][:1]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.threads <= 0:
        print(f"error: invalid number of threads: {args.threads}", file=sys.stderr)
        return 1
    if args.host != "127.0.0.1":
        print(_WARNING.format(host=args.host), file=sys.stderr, flush=True)
    from pyllama import _core

    try:
        devices = _devices(args.device)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    cache = None
    if args.cache:
        path = _cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            print(f"Failed to create cache directory: {path}: {e}", file=sys.stderr)
            return 1
        cache = str(path)
    # the server loop is C++ with the GIL released: Python's handlers would never run, so
    # Ctrl-C and SIGTERM end the process as they end llama.cpp's rpc-server
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _core.rpc_serve(f"{args.host}:{args.port}", cache, args.threads, devices)
    return 0


if __name__ == "__main__":
    sys.exit(main())
