"""How much prompt a replica's caches hold, in the router's blocks of text.

A replica keeps prompts in its slots' KV (``-c`` tokens in all) and, past them, in the host
prompt cache (``--cache-ram`` MiB, llama-server's default 8192; 0 turns it off, -1 means no
limit). The router compares text, not tokens, so tokens become bytes at ``BYTES_PER_TOKEN``
(English prose with a BPE vocabulary) and bytes become blocks. A host cache of N MiB holds
N MiB / (the KV bytes of one token): read from the GGUF header (layers, KV heads, head sizes)
and the cache types (``-ctk``/``-ctv``). Without the ``gguf`` package the host cache is left
out, and the index is as small as the slots: it forgets sooner than the replica does, never
later.
"""

from __future__ import annotations

import logging

__all__ = ["BYTES_PER_TOKEN", "MAX_BLOCKS", "capacity_blocks", "kv_bytes_per_token"]

log = logging.getLogger("pyllama.serve")

BYTES_PER_TOKEN = 4
MAX_BLOCKS = 65536  # a report's bound: 512 KiB of hashes, broadcast by Serve's controller

# bytes per element of the KV cache types llama.cpp accepts for -ctk / -ctv
_TYPE_BYTES = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "iq4_nl": 18 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
}


def _field(fields: dict, key: str) -> object:
    f = fields.get(key)
    return None if f is None else f.contents()


def _per_layer(value: object, n_layer: int) -> list[int]:
    if isinstance(value, list):  # some architectures give a count per layer
        return [int(v) for v in value][:n_layer]
    return [int(value)] * n_layer  # type: ignore[call-overload]


def kv_bytes_per_token(model_path: str, type_k: str = "f16", type_v: str = "f16") -> int | None:
    """KV-cache bytes of one token of the model at ``model_path``; None if unknown."""
    try:
        import gguf
    except ImportError:
        return None
    try:
        fields = gguf.GGUFReader(model_path).fields
        arch = str(_field(fields, "general.architecture"))
        n_layer = int(_field(fields, f"{arch}.block_count"))  # type: ignore[call-overload]
        n_embd = int(_field(fields, f"{arch}.embedding_length"))  # type: ignore[call-overload]
        heads = _field(fields, f"{arch}.attention.head_count")
        n_head = max(_per_layer(heads, n_layer))
        kv = _field(fields, f"{arch}.attention.head_count_kv")
        n_head_kv = _per_layer(kv if kv is not None else heads, n_layer)
        k_len = _field(fields, f"{arch}.attention.key_length") or n_embd // n_head
        v_len = _field(fields, f"{arch}.attention.value_length") or n_embd // n_head
    except (OSError, ValueError, TypeError, KeyError) as e:
        log.warning(
            "KV size of %s unknown (%s): the host prompt cache is not counted", model_path, e
        )
        return None
    bk = _TYPE_BYTES.get(type_k.lower(), 2.0)
    bv = _TYPE_BYTES.get(type_v.lower(), 2.0)
    return max(1, round(sum(h * (int(k_len) * bk + int(v_len) * bv) for h in n_head_kv)))


def capacity_blocks(
    slot_tokens: int, cache_ram_mib: int, kv_per_token: int | None, block_bytes: int
) -> int:
    """Blocks of ``block_bytes`` that a replica with ``slot_tokens`` of context (all slots)
    and a host cache of ``cache_ram_mib`` holds."""
    tokens = max(0, slot_tokens)
    if cache_ram_mib < 0:
        return MAX_BLOCKS
    if cache_ram_mib > 0 and kv_per_token:
        tokens += (cache_ram_mib << 20) // kv_per_token
    return max(1, min(MAX_BLOCKS, tokens * BYTES_PER_TOKEN // max(1, block_bytes)))
