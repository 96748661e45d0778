"""Failures raise Python exceptions with a useful message; the process never aborts."""

from __future__ import annotations

import pytest

from pyllama import Batch, Context, LlamaError, Model, Sampler, json_schema_to_grammar


def test_missing_model_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.gguf"):
        Model(str(tmp_path / "nope.gguf"))


def test_truncated_gguf_raises(tmp_path, smollm_path):  # item 20
    bad = tmp_path / "truncated.gguf"
    with open(smollm_path, "rb") as f:
        bad.write_bytes(f.read(1 << 20))  # header and part of the tensor data
    with pytest.raises(LlamaError, match="failed to load model"):
        Model(str(bad))


def test_garbage_file_raises(tmp_path):  # item 20
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(b"this is not a gguf file" * 100)
    with pytest.raises(LlamaError, match="failed to load model"):
        Model(str(bad))


def test_invalid_grammar_raises(llm):
    with pytest.raises(ValueError, match="invalid grammar"):
        Sampler.grammar(llm.model, "root ::= (unclosed")
    with pytest.raises(ValueError):
        llm.create_completion("x", max_tokens=2, grammar="root ::= [")


def test_invalid_json_schema_raises():
    with pytest.raises(ValueError, match="invalid JSON schema"):
        json_schema_to_grammar("{not json")
    with pytest.raises(ValueError):
        json_schema_to_grammar('{"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}')


def test_out_of_vocab_token_ids(llm):
    with pytest.raises(ValueError, match="vocabulary"):
        llm.create_completion([1, 2, llm.model.n_vocab + 5], max_tokens=2)
    with pytest.raises(ValueError, match="vocabulary"):
        llm.create_completion([-3], max_tokens=2)
    with pytest.raises(IndexError):
        llm.model.token_to_piece(llm.model.n_vocab)


def test_decode_rejects_bad_token_in_batch(llm):
    ctx = Context(llm.model, n_ctx=256, n_threads=2)
    batch = Batch(8, 1)
    batch.add(llm.model.n_vocab + 10, 0, [0], True)
    with pytest.raises(LlamaError, match="invalid batch"):
        ctx.decode(batch)
    batch.clear()
    batch.add(1, 0, [0], True)
    ctx.decode(batch)  # the context still works after a refused batch


def test_logits_of_unrequested_output(llm):
    ctx = Context(llm.model, n_ctx=256, n_threads=2)
    batch = Batch(8, 1)
    batch.add_sequence([1, 2, 3], 0, 0, True)
    ctx.decode(batch)
    assert ctx.logits_ith(2).shape == (llm.model.n_vocab,)
    with pytest.raises(IndexError):
        ctx.logits_ith(0)  # position 0 did not ask for logits
    with pytest.raises(IndexError):
        ctx.logits_ith(7)


def test_batch_bounds():
    b = Batch(2, 1)
    b.add(1, 0, [0])
    b.add(2, 1, [0])
    with pytest.raises(IndexError, match="full"):
        b.add(3, 2, [0])
    with pytest.raises(ValueError):
        Batch(0, 1)


def test_prompt_longer_than_context(llm):
    with pytest.raises(ValueError, match="context"):
        llm.create_completion("word " * 3000, max_tokens=1)


def test_empty_prompt(llm):
    with pytest.raises(ValueError, match="empty"):
        llm.create_completion([], max_tokens=1)


def test_sampler_moved_into_chain_refuses_use():
    chain = Sampler.chain()
    stage = Sampler.top_k(5)
    chain.add(stage)
    assert len(chain) == 1 and stage.empty
    with pytest.raises(ValueError, match="chain"):
        stage.reset()


def test_unknown_kv_type(llm):
    with pytest.raises(ValueError, match="KV cache type"):
        Context(llm.model, n_ctx=128, type_k="q9_9")
