"""llama-cpp-python's ``llama_cpp.llama_cache``: prompt caches for ``Llama.set_cache``."""

from pyllama.llama import BaseLlamaCache, LlamaCache, LlamaDiskCache, LlamaRAMCache

__all__ = ["BaseLlamaCache", "LlamaCache", "LlamaDiskCache", "LlamaRAMCache"]
