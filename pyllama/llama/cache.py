"""Prompt caches keyed by token sequences: a lookup returns the saved state whose tokens
share the longest prefix with the prompt (llama-cpp-python's ``LlamaRAMCache`` and
``LlamaDiskCache``). ``Llama.set_cache`` wires one into completions."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from pyllama.llama.state import LlamaState

__all__ = ["BaseLlamaCache", "LlamaCache", "LlamaDiskCache", "LlamaRAMCache"]


def longest_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class BaseLlamaCache(ABC):
    def __init__(self, capacity_bytes: int = 2 << 30) -> None:
        self.capacity_bytes = capacity_bytes

    @property
    @abstractmethod
    def cache_size(self) -> int: ...

    def _find_prefix_key(self, key: tuple[int, ...]) -> tuple[int, ...] | None:
        best, best_len = None, 0
        for k in self._keys():
            n = longest_token_prefix(k, key)
            if n > best_len:
                best, best_len = k, n
        return best

    @abstractmethod
    def _keys(self) -> list[tuple[int, ...]]: ...

    @abstractmethod
    def __getitem__(self, key: Sequence[int]) -> LlamaState: ...

    @abstractmethod
    def __contains__(self, key: Sequence[int]) -> bool: ...

    @abstractmethod
    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None: ...


def _size(state: LlamaState) -> int:
    return state.llama_state_size + state.input_ids.nbytes + state.scores.nbytes


class LlamaRAMCache(BaseLlamaCache):
    """States in memory, least recently used evicted past ``capacity_bytes``."""

    def __init__(self, capacity_bytes: int = 2 << 30) -> None:
        super().__init__(capacity_bytes)
        self.cache_state: OrderedDict[tuple[int, ...], LlamaState] = OrderedDict()

    @property
    def cache_size(self) -> int:
        return sum(_size(s) for s in self.cache_state.values())

    def _keys(self) -> list[tuple[int, ...]]:
        return list(self.cache_state)

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        found = self._find_prefix_key(tuple(key))
        if found is None:
            raise KeyError("Key not found")
        self.cache_state.move_to_end(found)
        return self.cache_state[found]

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._find_prefix_key(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        k = tuple(key)
        self.cache_state.pop(k, None)
        self.cache_state[k] = value
        while self.cache_size > self.capacity_bytes and len(self.cache_state) > 0:
            self.cache_state.popitem(last=False)


LlamaCache = LlamaRAMCache  # llama-cpp-python's alias


class LlamaDiskCache(BaseLlamaCache):
    """States on disk through the ``diskcache`` package (``pip install diskcache``)."""

    def __init__(
        self, cache_dir: str = ".cache/llama_cache", capacity_bytes: int = 2 << 30
    ) -> None:
        super().__init__(capacity_bytes)
        try:
            import diskcache
        except ImportError as e:
            raise ImportError(
                "LlamaDiskCache needs the diskcache package: pip install diskcache"
            ) from e
        self.cache = diskcache.Cache(cache_dir)

    @property
    def cache_size(self) -> int:
        return int(self.cache.volume())

    def _keys(self) -> list[tuple[int, ...]]:
        return [tuple(k) for k in self.cache.iterkeys()]

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        found = self._find_prefix_key(tuple(key))
        if found is None:
            raise KeyError("Key not found")
        value: Any = self.cache.pop(found)  # as llama-cpp-python: a hit takes the entry out
        return value

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._find_prefix_key(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        k = tuple(key)
        if k in self.cache:
            del self.cache[k]
        self.cache[k] = value
        while self.cache_size > self.capacity_bytes and len(self.cache) > 0:
            oldest = next(iter(self.cache.iterkeys()))
            del self.cache[oldest]
            print(f"LlamaDiskCache: evicted a state of {len(oldest)} tokens", file=sys.stderr)
