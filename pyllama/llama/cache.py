"""Prompt caches keyed by token sequences: a lookup returns the saved state whose tokens
share the longest prefix with the prompt (llama-cpp-python's ``LlamaRAMCache`` and
``LlamaDiskCache``). ``Llama.set_cache`` wires one into completions."""

from __future__ import annotations

import os
import shelve
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence

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
    """States pickled on disk (a ``shelve`` in ``cache_dir``; llama-cpp-python uses the
    diskcache package, pyllama the standard library). As llama-cpp-python's, a hit takes
    the entry out; entries are evicted, oldest written first, past ``capacity_bytes``."""

    def __init__(
        self, cache_dir: str = ".cache/llama_cache", capacity_bytes: int = 2 << 30
    ) -> None:
        super().__init__(capacity_bytes)
        os.makedirs(cache_dir, exist_ok=True)
        self.cache = shelve.open(os.path.join(cache_dir, "states"))  # noqa: SIM115 - kept open for the cache's life

    @property
    def cache_size(self) -> int:
        return sum(_size(self.cache[k]) for k in self.cache)

    def _keys(self) -> list[tuple[int, ...]]:
        return [_tokens(k) for k in self.cache]

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        found = self._find_prefix_key(tuple(key))
        if found is None:
            raise KeyError("Key not found")
        value: LlamaState = self.cache.pop(_name(found))
        return value

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._find_prefix_key(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        value.written = time.time()  # type: ignore[attr-defined]
        self.cache[_name(key)] = value
        while len(self.cache) > 1 and self.cache_size > self.capacity_bytes:
            oldest = min(self.cache, key=lambda k: getattr(self.cache[k], "written", 0.0))
            del self.cache[oldest]
        self.cache.sync()


def _name(tokens: Sequence[int]) -> str:
    return ",".join(str(int(t)) for t in tokens)


def _tokens(name: str) -> tuple[int, ...]:
    return tuple(int(t) for t in name.split(",") if t)
