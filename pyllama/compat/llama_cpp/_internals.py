"""``llama_cpp._internals`` is llama-cpp-python's ctypes layer (LlamaModel, LlamaContext,
LlamaBatch over llama.h's C structs). pyllama binds llama.cpp with pybind11 and offers no
ctypes mirror: this module imports, so that code which only imports it still runs, and any
name read from it is an AttributeError that says so."""

from __future__ import annotations

from typing import NoReturn


def __getattr__(name: str) -> NoReturn:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"llama_cpp._internals.{name}: llama-cpp-python's low-level ctypes layer is not part "
        "of pyllama (use pyllama.Llama, or pyllama._core for the bound llama.cpp objects)"
    )
