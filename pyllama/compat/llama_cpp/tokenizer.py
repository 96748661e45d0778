"""llama-cpp-python's ``llama_cpp.llama_tokenizer``: the model's own tokenizer as an object
(``LlamaHFTokenizer``, which wraps a transformers tokenizer, is not offered)."""

from pyllama.llama import LlamaTokenizer

__all__ = ["LlamaTokenizer"]
