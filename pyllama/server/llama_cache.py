"""llama.cpp's own cache directory (``fs_get_cache_directory`` on Linux): where
llama-server puts the files of ``-mu``/``--mmproj-url`` and ``-dr``. Not the hub cache
(``-hf``), which is the Hugging Face layout under ``HF_HOME``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["llama_cache_directory"]


def llama_cache_directory() -> Path:
    """``$LLAMA_CACHE``, else ``$XDG_CACHE_HOME/llama.cpp``, else ``~/.cache/llama.cpp``."""
    for var, sub in (("LLAMA_CACHE", ""), ("XDG_CACHE_HOME", "llama.cpp")):
        base = os.environ.get(var)
        if base:
            return Path(base) / sub if sub else Path(base)
    return Path.home() / ".cache" / "llama.cpp"
