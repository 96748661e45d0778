"""Generation with the real SmolLM2 model: determinism, batching, stops, constraints."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pyllama import Batch, Context, Llama, LlamaGrammar, Sampler

PROMPT = "The three primary colors are"


def test_greedy_is_deterministic(llm):
    a = llm.create_completion(PROMPT, max_tokens=24, temperature=0)
    llm.reset()
    b = llm.create_completion(PROMPT, max_tokens=24, temperature=0)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert a["choices"][0]["text"].strip()
    assert a["usage"]["completion_tokens"] == 24
    assert a["choices"][0]["finish_reason"] == "length"


def test_prompt_cache_gives_same_text(llm):
    """A second identical request reuses the KV cache and must still match."""
    first = llm.create_completion(PROMPT, max_tokens=16, temperature=0)["choices"][0]["text"]
    again = llm.create_completion(PROMPT, max_tokens=16, temperature=0)["choices"][0]["text"]
    assert first == again


def test_seeded_sampling_is_reproducible(llm):
    a = llm.create_completion(PROMPT, max_tokens=16, temperature=1.0, seed=1234)
    b = llm.create_completion(PROMPT, max_tokens=16, temperature=1.0, seed=1234)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]


def greedy_alone(model, tokens: list[int], n: int) -> list[int]:
    ctx = Context(model, n_ctx=512, n_threads=2)
    batch = Batch(512, 1)
    batch.add_sequence(tokens, 0, 0, True)
    ctx.decode(batch)
    smpl = Sampler.greedy()
    out = []
    for _ in range(n):
        t = smpl.sample(ctx, -1)
        out.append(t)
        batch.clear()
        batch.add(t, len(tokens) + len(out) - 1, [0], True)
        ctx.decode(batch)
    return out


def test_two_sequences_in_one_batch_match_each_alone(llm):
    model = llm.model
    prompts = [
        model.tokenize("Once upon a time", True, False),
        model.tokenize("def fibonacci(n):", True, False),
    ]
    n = 12
    alone = [greedy_alone(model, p, n) for p in prompts]

    ctx = Context(model, n_ctx=1024, n_seq_max=2, n_threads=2)
    batch = Batch(512, 2)
    for s, p in enumerate(prompts):
        batch.add_sequence(p, 0, s, True)
    ctx.decode(batch)
    last = [len(prompts[0]) - 1, len(prompts[0]) + len(prompts[1]) - 1]
    samplers = [Sampler.greedy(), Sampler.greedy()]
    together: list[list[int]] = [[], []]
    for _ in range(n):
        toks = [samplers[s].sample(ctx, last[s]) for s in range(2)]
        batch.clear()
        for s in range(2):
            together[s].append(toks[s])
            batch.add(toks[s], len(prompts[s]) + len(together[s]) - 1, [s], True)
        ctx.decode(batch)
        last = [0, 1]
    assert together == alone


def test_stop_string_never_leaks(llm):
    full = llm.create_completion("Count: 1, 2, 3,", max_tokens=20, temperature=0)["choices"][0][
        "text"
    ]
    assert " 5" in full, full
    res = llm.create_completion("Count: 1, 2, 3,", max_tokens=20, temperature=0, stop=[" 5"])
    text = res["choices"][0]["text"]
    assert text == full[: full.index(" 5")]
    assert res["choices"][0]["finish_reason"] == "stop"


def test_stream_concatenates_to_the_full_text(llm):
    full = llm.create_completion(PROMPT, max_tokens=20, temperature=0)["choices"][0]["text"]
    chunks = list(llm.create_completion(PROMPT, max_tokens=20, temperature=0, stream=True))
    assert "".join(c["choices"][0]["text"] for c in chunks) == full
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert sum(1 for c in chunks if c["choices"][0]["text"]) <= 20


def test_grammar_constrains_output(llm):
    gbnf = 'root ::= ("yes" | "no") "."'
    res = llm.create_completion(
        "Is the sky blue? Answer:", max_tokens=8, temperature=0, grammar=gbnf
    )
    assert res["choices"][0]["text"] in ("yes.", "no.")


def test_json_schema_output_validates(llm):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema))
    res = llm.create_completion("A person as JSON:", max_tokens=64, temperature=0, grammar=grammar)
    data = json.loads(res["choices"][0]["text"])
    jsonschema.validate(data, schema)


def test_response_format_json_object_in_chat(llm):
    res = llm.create_chat_completion(
        [
            {
                "role": "user",
                "content": "Reply with a JSON object with keys name and color for a red apple.",
            }
        ],
        max_tokens=128,
        temperature=0,
        response_format={"type": "json_object"},
    )
    assert (
        res["choices"][0]["finish_reason"] == "stop"
    )  # the grammar ended the object, not max_tokens
    assert isinstance(json.loads(res["choices"][0]["message"]["content"]), dict)


def test_chat_completion_shape(llm):
    res = llm.create_chat_completion(
        [{"role": "user", "content": "Say hello."}], max_tokens=16, temperature=0
    )
    assert res["object"] == "chat.completion"
    assert res["id"].startswith("chatcmpl-")
    msg = res["choices"][0]["message"]
    assert msg["role"] == "assistant" and msg["content"]
    assert res["usage"]["prompt_tokens"] > 5


def test_chat_stream_matches_non_stream(llm):
    msgs = [{"role": "user", "content": "Name a fruit."}]
    full = llm.create_chat_completion(msgs, max_tokens=16, temperature=0)
    chunks = list(llm.create_chat_completion(msgs, max_tokens=16, temperature=0, stream=True))
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == full["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == full["choices"][0]["finish_reason"]


def test_logprobs(smollm_path):
    llm = Llama(smollm_path, n_ctx=256, logits_all=True, verbose=False)
    res = llm.create_completion(PROMPT, max_tokens=4, temperature=0, logprobs=3)
    lp = res["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == 4 and len(lp["top_logprobs"]) == 4
    for chosen, top in zip(lp["token_logprobs"], lp["top_logprobs"]):
        assert chosen <= 0 and len(top) == 3
        assert abs(max(top.values()) - chosen) < 1e-4  # greedy picks the most likely token


def test_generate_yields_tokens(llm):
    gen = llm.generate(llm.tokenize(PROMPT.encode()), temp=0)
    toks = [next(gen) for _ in range(10)]
    gen.close()
    text = llm.create_completion(PROMPT, max_tokens=10, temperature=0)["choices"][0]["text"]
    assert llm.detokenize(toks).decode() == text


def test_embeddings(smollm_path):
    llm = Llama(smollm_path, n_ctx=512, embedding=True, pooling_type=1, verbose=False)  # mean
    a, b, c = llm.embed(
        ["The cat sat on the mat.", "A cat is sitting on a mat.", "Stock markets fell sharply."],
        normalize=True,
    )
    assert len(a) == llm.n_embd()
    dot = lambda x, y: sum(p * q for p, q in zip(x, y))  # noqa: E731
    assert abs(dot(a, a) - 1.0) < 1e-4
    assert dot(a, b) > dot(a, c)


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": "hot"},
        {"top_p": 2.0},
        {"repeat_penalty": -1.0},
        {"mirostat_mode": 7},
        {"tfs_z": 0.5},
    ],
)
def test_bad_sampling_values_raise(llm, bad):
    with pytest.raises((ValueError, TypeError)):
        llm.create_completion(PROMPT, max_tokens=2, **bad)
