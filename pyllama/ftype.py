"""A loaded model's file type as llama.cpp names it (``Q4_1``, ``Q4_K - Medium``,
``(guessed) F16``): llama-server's /props ``model_ftype``.

llama.cpp writes that name at the end of the model's description (``llama 256M Q4_1``);
the names themselves come from libllama's ``llama_ftype_name``, so they are exactly the
loaded library's. ``Model`` does not bind ``llama_model_ftype`` yet; when it does, this
becomes one call."""

from __future__ import annotations

import ctypes
import functools
import sys
from pathlib import Path

from pyllama import _core

__all__ = ["ftype_name", "libllama_path"]

_GUESSED = 1024  # LLAMA_FTYPE_GUESSED: the type was guessed from the tensors
_MAX_FTYPE = 256  # llama_ftype values are below this (41 in this tree)


def libllama_path(lib_dir: Path, platform: str = sys.platform) -> Path:
    """libllama's file in ``lib_dir``: the first of the platform's names that exists
    (Windows: an MSVC or clang build makes llama.dll, a MinGW one libllama.dll), else the
    first name, for the caller's error to name."""
    if platform == "win32":
        names = ["llama.dll", "libllama.dll"]
    elif platform == "darwin":
        names = ["libllama.dylib"]
    else:
        names = ["libllama.so"]
    return next((lib_dir / n for n in names if (lib_dir / n).is_file()), lib_dir / names[0])


@functools.cache
def _names() -> tuple[str, ...]:
    """Every name libllama gives a file type, longest first; empty if it cannot be read."""
    lib_dir = Path(_core.__file__).parent / "lib"
    try:
        lib = ctypes.CDLL(str(libllama_path(lib_dir)))  # the copy _core already loaded
        fn = lib.llama_ftype_name
    except (OSError, AttributeError):
        return ()
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_int]
    names = {fn(t | flag).decode() for t in range(_MAX_FTYPE) for flag in (0, _GUESSED)}
    return tuple(sorted(names, key=len, reverse=True))


def ftype_name(model: _core.Model) -> str | None:
    """The file type's name, or None where it cannot be told (no such library)."""
    desc = model.description
    for name in _names():
        if desc.endswith(" " + name):
            return name
    return None
