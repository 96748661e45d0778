"""llama-cpp-python's ``llama_speculative``: draft models for ``Llama(draft_model=...)``."""

from pyllama.llama.speculative import LlamaDraftModel, LlamaPromptLookupDecoding

__all__ = ["LlamaDraftModel", "LlamaPromptLookupDecoding"]
