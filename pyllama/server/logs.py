"""The server's log lines, shaped by llama-server's logging options: ``--log-disable``,
``--log-file``, ``--log-jsonl``, ``--log-colors``, ``--log-verbosity``/``-v``,
``--log-prefix`` and ``--log-timestamps``. pyllama's own lines go through the ``pyllama``
logger (info and below on stdout, warnings and errors on stderr, as before: "pyllama-server:
<message>"); llama.cpp's own lines follow the same verbosity and file."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import TextIO

__all__ = ["LogOptions", "setup_logging"]

# llama.cpp's verbosity (0 generic, 1 error, 2 warning, 3 info, 4 trace) as Python levels
_LEVELS = {0: logging.CRITICAL, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO}
# and as ggml log levels echoed by _core (1 debug, 2 info, 3 warn, 4 error, 5 none): its
# warnings by default, everything from trace (4) up
_GGML = {0: 5, 1: 4, 2: 3, 3: 3}
_CHARS = {"DEBUG": "D", "INFO": "I", "WARNING": "W", "ERROR": "E", "CRITICAL": "E"}
_COLORS = {"DEBUG": "\033[90m", "WARNING": "\033[35m", "ERROR": "\033[31m", "CRITICAL": "\033[31m"}
_START = time.monotonic()


@dataclass
class LogOptions:
    disable: bool = False
    file: str | None = None
    jsonl: bool = False
    colors: str = "auto"  # on | off | auto (a terminal)
    verbosity: int = 3
    prefix: bool = False
    timestamps: bool = False


class _Format(logging.Formatter):
    def __init__(self, opts: LogOptions, stream: TextIO | None) -> None:
        super().__init__()
        self.opts = opts
        tty = stream is not None and hasattr(stream, "isatty") and stream.isatty()
        self.color = opts.colors == "on" or (opts.colors == "auto" and tty and not opts.jsonl)

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        if self.opts.jsonl:
            return json.dumps(
                {
                    "timestamp": round(record.created, 6),
                    "level": record.levelname.lower(),
                    "logger": record.name,
                    "message": message,
                }
            )
        line = f"pyllama-server: {message}"
        if self.opts.prefix:
            line = f"{_CHARS.get(record.levelname, 'I')} {line}"
        if self.opts.timestamps:
            t = record.created - time.time() + time.monotonic() - _START
            us = int(t * 1e6)
            stamp = f"{us // 60_000_000}.{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}.{us % 1000:03d}"
            line = f"{stamp} {line}"
        color = _COLORS.get(record.levelname) if self.color else None
        return f"{color}{line}\033[0m" if color else line


class _LogFile(logging.FileHandler):
    """--log-file. A line it cannot write (a full disk) is dropped, not a traceback on stderr
    per record: the first failure is said once, and the console still gets every line."""

    failed = False

    def handleError(self, record: logging.LogRecord) -> None:
        if self.failed:
            return
        self.failed = True
        e = sys.exc_info()[1]
        why = getattr(e, "strerror", None) or e
        print(
            f"pyllama-server: --log-file '{self.baseFilename}': {why}; "
            "lines that cannot be written to it are dropped",
            file=sys.stderr,
            flush=True,
        )


class _Below(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


def setup_logging(opts: LogOptions) -> None:
    """Configure the ``pyllama`` logger (and llama.cpp's echo) for a server process.
    ValueError names a log file that cannot be opened."""
    from pyllama import _core

    root = logging.getLogger("pyllama")
    for h in list(root.handlers):
        root.removeHandler(h)
    root.propagate = False
    if opts.disable:
        root.addHandler(logging.NullHandler())
        root.setLevel(logging.CRITICAL + 1)
        _core.set_log_level(5)
        return
    level = _LEVELS.get(opts.verbosity, logging.DEBUG)
    root.setLevel(level)
    if opts.jsonl:  # one stream of JSON objects, on stdout
        out = logging.StreamHandler(sys.stdout)
        out.setFormatter(_Format(opts, sys.stdout))
        root.addHandler(out)
    else:
        out = logging.StreamHandler(sys.stdout)
        out.addFilter(_Below(logging.WARNING))
        out.setFormatter(_Format(opts, sys.stdout))
        err = logging.StreamHandler(sys.stderr)
        err.setLevel(logging.WARNING)
        err.setFormatter(_Format(opts, sys.stderr))
        root.addHandler(out)
        root.addHandler(err)
    if opts.file:
        try:
            handler = _LogFile(opts.file, encoding="utf-8")
        except OSError as e:
            raise ValueError(f"--log-file: cannot open '{opts.file}': {e.strerror}") from e
        handler.setFormatter(_Format(opts, None))
        root.addHandler(handler)
        if not _core.set_log_file(opts.file):
            raise ValueError(f"--log-file: cannot open '{opts.file}'")
    if "PYLLAMA_LOG_LEVEL" not in os.environ:  # an explicit level wins
        _core.set_log_level(_GGML.get(opts.verbosity, 1))
