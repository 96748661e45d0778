"""pyllama.serve.cachesize: how much prompt a replica's caches hold, from its flags and its
model's KV size (the router's index was 16 MiB of prompt a replica whatever its -c)."""

from __future__ import annotations

from pyllama.serve.cachesize import MAX_BLOCKS, capacity_blocks, kv_bytes_per_token


def test_kv_bytes_per_token_of_the_demo_model(smollm_path: str):
    # SmolLM2-135M: 30 layers x 3 KV heads x 64 dims x (K + V) x 2 bytes (f16)
    assert kv_bytes_per_token(smollm_path) == 30 * 3 * 64 * 2 * 2 == 23040
    assert kv_bytes_per_token(smollm_path, "q8_0", "q8_0") == round(30 * 3 * 64 * 2 * 34 / 32)


def test_unreadable_model_is_unknown(tmp_path):
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"nope")
    assert kv_bytes_per_token(str(bad)) is None


def test_capacity_follows_context_and_host_cache():
    assert capacity_blocks(16384, 0, 23040, 256) == 16384 * 4 // 256  # slots only
    assert capacity_blocks(4096, 0, 23040, 256) == 64  # a small -c holds less
    # llama-server's default host cache, 8192 MiB, at 22.5 KiB a token: 372,827 tokens more
    assert capacity_blocks(16384, 8192, 23040, 256) == (16384 + (8192 << 20) // 23040) * 4 // 256
    assert capacity_blocks(16384, 8192, None, 256) == 256  # KV size unknown: slots only
    assert capacity_blocks(16384, -1, None, 256) == MAX_BLOCKS  # no limit: the cap
    assert capacity_blocks(10**9, 0, None, 16) == MAX_BLOCKS
