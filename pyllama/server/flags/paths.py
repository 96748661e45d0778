"""File checks for option values. ``Path.is_dir()`` raises for a name the system refuses
(ENAMETOOLONG, EACCES on a parent): here that is an answer, False, and a file that
cannot be read is a ValueError naming the option, never a traceback."""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_dir", "is_file", "read_text"]


def is_dir(path: str) -> bool:
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):  # ValueError: an embedded NUL
        return False


def is_file(path: str) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def read_text(path: str, flag: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")  # not the locale's (cp1252 on Windows)
    except (OSError, ValueError) as e:
        raise ValueError(f"{flag}: cannot read '{path[:200]}': {getattr(e, 'strerror', e)}") from e
