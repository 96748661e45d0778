"""Model.tokenize_prompt: the tokens of tokenize(text, add_special, parse_special=True),
with the stretches between control tokens from a cache, on every vocabulary llama.cpp
ships test vectors for (BPE ones use the cache, the others tokenize whole)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyllama import Model

from helpers.tokenizer_vectors import read_vectors

BPE = 2  # LLAMA_VOCAB_TYPE_BPE
VOCABS = sorted(
    p.name[: -len(".inp")]
    for p in (Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models").glob(
        "*.gguf.inp"
    )
)


def control_texts(model: Model) -> list[str]:
    out = []
    for t in range(model.n_vocab):
        if model.is_control(t):
            text = model.token_text(t).decode("utf-8", "replace")
            if text:
                out.append(text)
    return out


def prompts(model: Model, texts: list[str], seed: int) -> list[str]:
    """Chat-like prompts: long stretches of the vectors' texts between control tokens, with
    whitespace, glued specials and special text inside the stretches."""
    rng = random.Random(seed)
    specials = control_texts(model)[:64] or ["<s>"]
    glue = ["", " ", "\n", "  \n ", "\t"]
    out = []
    for _ in range(12):
        parts = []
        for _ in range(rng.randint(2, 8)):
            parts.append(rng.choice(specials))
            parts.append(rng.choice(glue))
            body = " ".join(rng.choice(texts) for _ in range(rng.randint(1, 40)))
            if rng.random() < 0.3:  # a special inside a stretch, or one cut in half
                s = rng.choice(specials)
                body += s if rng.random() < 0.5 else s[: len(s) // 2]
            parts.append(body)
            parts.append(rng.choice(glue))
        out.append("".join(parts))
    return out


@pytest.mark.parametrize("vocab", VOCABS)
def test_same_tokens_as_tokenize(vendor_models: Path, vocab: str):
    model = Model(str(vendor_models / vocab), vocab_only=True)
    texts = [t for t, _ in read_vectors(vendor_models / vocab) if t.strip()]
    for i, p in enumerate(prompts(model, texts, seed=len(vocab))):
        for add_special in (True, False):
            want = model.tokenize(p, add_special, True)
            assert model.tokenize_prompt(p, add_special) == want, (vocab, i, add_special)
            assert model.tokenize_prompt(p, add_special) == want, (vocab, i, "from the cache")
    info = model.piece_cache_info()
    if model.vocab_type == BPE and not model.add_eos:
        assert info["hits"] > 0, info  # the comparison above went through the cache
    else:
        assert info["entries"] == 0, info


def test_chat_prompt_pieces_come_from_the_cache(smollm_path: str):
    """A long system prompt sent again with another question: the same tokens as a whole
    tokenization, its stretch a cache hit the second time."""
    model = Model(smollm_path, vocab_only=True)
    system = "You are a helpful assistant. Answer briefly and politely. " * 200
    first = f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    second = first.replace("Hi", "How are you?")
    assert model.tokenize_prompt(first) == model.tokenize(first, True, True)
    before = model.piece_cache_info()
    assert before["misses"] == 1 and before["entries"] == 1
    assert model.tokenize_prompt(second) == model.tokenize(second, True, True)
    after = model.piece_cache_info()
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]


def test_non_bpe_vocab_tokenizes_whole(minilm_path: str):
    model = Model(minilm_path, vocab_only=True)
    text = "[CLS] a sentence [SEP] " * 100
    assert model.tokenize_prompt(text) == model.tokenize(text, True, True)
    assert model.piece_cache_info()["entries"] == 0
