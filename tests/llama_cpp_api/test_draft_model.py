"""``Llama(draft_model=LlamaPromptLookupDecoding(...))``: drafted tokens are evaluated with
the sampled one in a batch and kept only where sampling agrees, so the text (and with
``logits_all`` the logprobs) is the text without a draft, in fewer decodes."""

from __future__ import annotations

import numpy as np
import pytest

from pyllama.compat.llama_cpp import Llama
from pyllama.compat.llama_cpp.speculative import LlamaDraftModel, LlamaPromptLookupDecoding

# a prompt whose continuation repeats what it already holds: prompt lookup finds it
PROMPT = "Count: one two three four five, one two three four five, one two three four five, one"


class Counting(LlamaDraftModel):
    """Prompt lookup, counting what it drafted."""

    def __init__(self) -> None:
        self.inner = LlamaPromptLookupDecoding(max_ngram_size=3, num_pred_tokens=8)
        self.drafted = 0

    def __call__(self, input_ids, /, **kwargs):
        out = self.inner(input_ids)
        self.drafted += len(out)
        return out


def _run(llm: Llama, **kw: object) -> tuple[dict, int]:
    decodes = 0
    eval_ = llm.eval

    def counted(tokens, **kwargs):
        nonlocal decodes
        decodes += 1
        return eval_(tokens, **kwargs)

    llm.eval = counted  # type: ignore[method-assign]
    out = llm.create_completion(PROMPT, max_tokens=32, temperature=0, **kw)
    return out, decodes


@pytest.mark.parametrize("logits_all", [False, True])
def test_a_draft_gives_the_same_text_in_fewer_decodes(smollm_path: str, logits_all: bool) -> None:
    kw = {"logprobs": 3} if logits_all else {}
    plain, plain_decodes = _run(
        Llama(smollm_path, n_ctx=512, logits_all=logits_all, verbose=False), **kw
    )
    draft = Counting()
    spec = Llama(smollm_path, n_ctx=512, logits_all=logits_all, draft_model=draft, verbose=False)
    drafted, drafted_decodes = _run(spec, **kw)
    assert drafted["choices"][0]["text"] == plain["choices"][0]["text"]
    assert drafted["usage"] == plain["usage"]
    if logits_all:
        a, b = drafted["choices"][0]["logprobs"], plain["choices"][0]["logprobs"]
        assert a["tokens"] == b["tokens"]
        # each token's row is the one it was drawn from: greedy, so that row's best
        for token, top in zip(a["tokens"], a["top_logprobs"]):
            assert max(top, key=top.get) == token
        # a batch of several tokens runs other kernels than one token: close, not equal
        np.testing.assert_allclose(a["token_logprobs"], b["token_logprobs"], atol=0.5)
    assert draft.drafted > 0
    assert drafted_decodes < plain_decodes, (drafted_decodes, plain_decodes)


def test_find_candidate_pred_tokens_takes_the_longest_ngram_first() -> None:
    f = LlamaPromptLookupDecoding.find_candidate_pred_tokens
    ids = np.array([7, 1, 2, 9, 4, 2, 5, 1, 2])
    # the 2-gram (1, 2) recurs at 1: what followed it
    assert f(ids, max_ngram_size=2, num_pred_tokens=3).tolist() == [9, 4, 2]
    # only 1-grams: the first earlier 2 is at 2
    assert f(ids, max_ngram_size=1, num_pred_tokens=2).tolist() == [9, 4]
    assert f(np.array([3]), max_ngram_size=2, num_pred_tokens=2).tolist() == []


def test_a_draft_model_keeps_every_row_as_llama_cpp_python(smollm_path: str) -> None:
    # llama-cpp-python turns logits_all on with a draft model: logprobs work without it
    llm = Llama(smollm_path, n_ctx=512, draft_model=LlamaPromptLookupDecoding(), verbose=False)
    out = llm.create_completion(PROMPT, max_tokens=4, temperature=0, logprobs=2)
    assert len(out["choices"][0]["logprobs"]["tokens"]) == 4
