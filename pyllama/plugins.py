"""Backend plugins: ggml backends installed as distributions of their own.

``pip install "pyllama-engine[cuda13]"`` or ``[vulkan]`` adds a distribution that puts one
module in ``pyllama_plugins/<name>/`` (a namespace package shared by every plugin) with a
``plugin.json`` beside it. When pyllama is imported, each plugin folder on ``sys.path`` is
loaded after the core's own backends, so that its devices exist before any model loads.

ggml has no stable ABI: a plugin built for another pyllama version is refused. A plugin
that cannot load (no driver, a library missing, the wrong version) is reported once, as a
``RuntimeWarning`` naming the reason, and skipped: the CPU and the other plugins go on.
``PYLLAMA_PLUGINS=none`` loads none; ``PYLLAMA_PLUGINS=vulkan`` only the ones named.

On Linux a module finds what it links through its RUNPATH (``pyllama/lib``, the nvidia-*
wheels' ``nvidia/cu13/lib``). Windows has no RUNPATH: the same folders (the wheels' DLL
folders there) are added with ``os.add_dll_directory`` before the module is loaded, which
the core's loader searches (``LoadLibraryExW`` with ``LOAD_LIBRARY_SEARCH_DEFAULT_DIRS``).
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyllama import _core

__all__ = ["PACKAGE", "Plugin", "dll_directories", "load_all", "plugins"]

PACKAGE = "pyllama_plugins"


@dataclass(frozen=True)
class Plugin:
    name: str  # "cuda", "vulkan": the folder's name
    path: str  # its folder
    distribution: str  # "pyllama-engine-cuda13"
    version: str
    backends: tuple[str, ...]  # the ggml backends it added ("CUDA"); () when skipped
    error: str  # why it was skipped; "" when loaded


_loaded: list[Plugin] | None = None
_dll_dirs: list[Any] = []  # Windows: os.add_dll_directory's handles; closing one removes it


def _folders() -> list[Path]:
    """Every pyllama_plugins/<name>/ folder on sys.path, first occurrence of a name wins."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return []
    seen: dict[str, Path] = {}
    for root in spec.submodule_search_locations:
        for folder in sorted(Path(root).iterdir()):
            if (folder / "plugin.json").is_file():
                seen.setdefault(folder.name, folder)
    return list(seen.values())


def _wanted(name: str) -> bool:
    chosen = os.environ.get("PYLLAMA_PLUGINS", "").strip()
    if not chosen:
        return True
    names = {n.strip() for n in chosen.split(",")}
    return "none" not in names and name in names


def _missing(needs: dict[str, str]) -> str:
    """Why the first library a module opens at run time cannot be opened here; "" if none.

    plugin.json's ``needs`` names them: the CUDA runtime opens the driver (libcuda.so.1,
    nvcuda.dll on Windows) itself, so the module loads without it and ggml then finds no
    device, saying only that the "driver version is insufficient".
    """
    for lib, what in needs.items():
        try:
            ctypes.CDLL(lib)
        except OSError as e:
            return f"{lib} ({what}) cannot be loaded: {e}"
    return ""


def dll_directories(folder: Path, core_lib: Path) -> list[Path]:
    """Windows: the folders a plugin's module finds its DLLs in, as its RUNPATH names them
    on Linux: the core's ``pyllama/lib`` (ggml-base) and every folder of DLLs from the
    nvidia-* wheels in the same site-packages (``nvidia/cu13/bin/x86_64`` for CUDA 13,
    ``nvidia/<name>/bin`` before): found by looking, as the layout changed with CUDA 13."""
    nvidia = folder.parent.parent / "nvidia"
    wheels = {dll.parent for dll in nvidia.glob("*/bin/**/*.dll")} if nvidia.is_dir() else set()
    return [core_lib, *sorted(wheels)]


def _add_dll_directories(folder: Path) -> None:
    """Windows: let the plugin's module find the DLLs it links (see ``dll_directories``)."""
    if sys.platform != "win32":
        return
    for d in dll_directories(folder, Path(_core.__file__).parent / "lib"):
        if d.is_dir():
            _dll_dirs.append(os.add_dll_directory(str(d)))


def _load(folder: Path) -> Plugin:
    try:
        meta = json.loads((folder / "plugin.json").read_text(encoding="utf-8"))
        distribution, version = str(meta["distribution"]), str(meta["version"])
        needs = {str(k): str(v) for k, v in meta.get("needs", {}).items()}
    except (OSError, ValueError, KeyError, AttributeError) as e:
        return Plugin(folder.name, str(folder), "?", "?", (), f"unreadable plugin.json: {e}")
    if version != _core.__version__:
        error = (
            f"{distribution} {version} does not match pyllama-engine {_core.__version__} "
            f"(ggml has no stable ABI): pip install {distribution}=={_core.__version__}"
        )
        return Plugin(folder.name, str(folder), distribution, version, (), error)
    if missing := _missing(needs):
        return Plugin(folder.name, str(folder), distribution, version, (), missing)
    _add_dll_directories(folder)
    try:
        added = tuple(_core.load_plugin(str(folder)))
    except RuntimeError as e:
        return Plugin(folder.name, str(folder), distribution, version, (), str(e))
    return Plugin(folder.name, str(folder), distribution, version, added, "")


def load_all() -> list[Plugin]:
    """Load every installed plugin, once per process (pyllama's import calls this)."""
    global _loaded
    if _loaded is None:
        _loaded = [_load(folder) for folder in _folders() if _wanted(folder.name)]
        for p in _loaded:
            if p.error:
                warnings.warn(
                    f"pyllama: backend plugin {p.name} ({p.path}) not loaded: {p.error}",
                    RuntimeWarning,
                    stacklevel=3,
                )
    return list(_loaded)


def plugins() -> list[Plugin]:
    """The plugins found at import: loaded ones with their backends, skipped ones with why."""
    return load_all()
