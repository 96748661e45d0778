"""Opt-in: ``import llama_cpp`` (and ``llama_cpp.llama_types`` ...) resolves to
``pyllama.compat.llama_cpp``, so code written for llama-cpp-python runs unchanged.

    import pyllama.compat.as_llama_cpp
    pyllama.compat.as_llama_cpp.install()          # then: import llama_cpp

    python -m pyllama.compat.as_llama_cpp app.py --its-args
    python -m pyllama.compat.as_llama_cpp -m pytest tests/

Nothing is installed by importing pyllama: only ``install()`` (or this command) does it,
for the process that calls it. A llama_cpp already imported, or a llama_cpp submodule
that pyllama does not offer, is an ImportError that names it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import runpy
import sys
from types import ModuleType

__all__ = ["install", "installed", "main"]

TARGET = "pyllama.compat.llama_cpp"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``llama_cpp[.x]`` and loads it as the very module ``TARGET[.x]``."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname != "llama_cpp" and not fullname.startswith("llama_cpp."):
            return None
        real = TARGET + fullname[len("llama_cpp") :]
        if importlib.util.find_spec(real) is None:
            raise ImportError(
                f"{fullname}: pyllama's llama_cpp has no such module (see pyllama.compat.llama_cpp)",
                name=fullname,
            )
        return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname == "llama_cpp")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(TARGET + spec.name[len("llama_cpp") :])

    def exec_module(self, module: ModuleType) -> None:
        pass  # already executed under its own name


def installed() -> bool:
    return any(isinstance(f, _Alias) for f in sys.meta_path)


def install() -> None:
    """From now on in this process, ``import llama_cpp`` is pyllama's."""
    if installed():
        return
    loaded = sys.modules.get("llama_cpp")
    if loaded is not None:
        raise ImportError(
            f"llama_cpp is already imported from {getattr(loaded, '__file__', loaded)!r}: "
            "call pyllama.compat.as_llama_cpp.install() before anything imports it"
        )
    sys.meta_path.insert(0, _Alias())


def main(argv: list[str] | None = None) -> None:
    """``python -m pyllama.compat.as_llama_cpp (-m module | script.py) [args...]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(__doc__)
        raise SystemExit(0 if args[:1] in (["-h"], ["--help"]) else 2)
    install()
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
