"""LoRA adapters end to end with the real model and a small random adapter written with gguf.

All greedy. The adapter (tests/lora_adapter.py) adapts the attention and FFN weights of
every layer; at scale 1.0 it changes what the model says, at scale 0 it must change nothing.

Its A matrices are Q4_1, like the model's weights, for a reason: on CPU, llama.cpp
multiplies F32/F16 weights with tinyBLAS when a batch has two or more rows but with
ggml's vec_dot for a single row (llamafile_sgemm returns false for n < 2), so with an
F32/F16 adapter one sequence decoded beside others can differ in the last bits from the
same sequence decoded alone, and greedy picks drift apart. Q4_1 goes through vec_dot
either way, which is what makes "batched == alone" checkable here (as in test_engine).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest

from pyllama import _core
from pyllama.engine import AsyncEngine, generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

from helpers.lora_adapter import base_weights, write_lora

PROMPTS = [
    "<|im_start|>user\nName three fruits.<|im_end|>\n<|im_start|>assistant\n",
    "The capital of France is",
]
N_PREDICT = 16
RANK = 4


@pytest.fixture(scope="module")
def model(smollm_path):
    return _core.Model(smollm_path)


@pytest.fixture(scope="module")
def adapter_path(smollm_path, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("lora") / "smollm2-random-lora.gguf"
    return str(write_lora(smollm_path, out, rank=RANK, seed=0, a_type="q4_1"))


@pytest.fixture(scope="module")
def prompts(model) -> list[list[int]]:
    return [model.tokenize(p, True, True) for p in PROMPTS]


@pytest.fixture(scope="module")
def base_tokens(model, prompts) -> list[list[int]]:
    """What the model says without any adapter."""
    with engine_for(model) as eng:
        return [run_alone(eng, p) for p in prompts]


@pytest.fixture(scope="module")
def adapted_tokens(model, adapter_path, prompts) -> list[list[int]]:
    """What it says with the adapter loaded at scale 1.0."""
    with engine_for(model, lora=[(adapter_path, 1.0)]) as eng:
        assert eng.lora_scales() == [1.0]
        return [run_alone(eng, p) for p in prompts]


@pytest.fixture(scope="module")
def shared(model, adapter_path) -> Iterator[_core.Engine]:
    """One engine, adapter loaded at 0.0, for tests that give every task its scales."""
    with engine_for(model, lora=[(adapter_path, 0.0)], n_parallel=4) as eng:
        yield eng


@contextlib.contextmanager
def engine_for(model, **kw) -> Iterator[_core.Engine]:
    kw.setdefault("n_ctx", kw.get("n_parallel", 1) * 512)
    eng = open_engine(model, n_threads=2, **kw)
    try:
        yield eng
    finally:
        eng.stop()


def task(prompt: list[int], *, n: int = N_PREDICT, sampling=None, **kw) -> _core.TaskParams:
    # From clean KV: a reused cached prefix may change float summation order.
    kw.setdefault("cache_prompt", False)
    sampling = sampling or make_sampling_params(temperature=0)
    return make_task(prompt, n_predict=n, sampling=sampling, **kw)


def tokens_of(events) -> list[int]:
    return [e.token for e in events if e.type == "token" and e.token >= 0]


def run_alone(eng: _core.Engine, prompt: list[int], **kw) -> list[int]:
    events = list(generate(eng, task(prompt, **kw)))
    assert events[-1].type == "final", events[-1].message
    return tokens_of(events)


# ------------------------------------------------------------------ the file itself


def test_adapter_file_has_what_llama_cpp_reads(smollm_path, adapter_path):
    reader = gguf.GGUFReader(adapter_path)

    def value(key):
        return reader.fields[key].contents()

    assert value("general.type") == "adapter"
    assert value("adapter.type") == "lora"
    assert value("general.architecture") == "llama"
    assert value("adapter.lora.alpha") == pytest.approx(RANK)

    _, base = base_weights(smollm_path)
    tensors = {t.name: t for t in reader.tensors}
    pairs = {n.removesuffix(".lora_a") for n in tensors if n.endswith(".lora_a")}
    assert pairs and pairs == {n.removesuffix(".lora_b") for n in tensors if n.endswith(".lora_b")}
    assert len(tensors) == 2 * len(pairs)
    for name in pairs:
        n_in, n_out = base[name]
        a, b = tensors[f"{name}.lora_a"], tensors[f"{name}.lora_b"]
        # ggml order: A is [n_in, rank], B is [rank, n_out]
        assert tuple(a.shape) == (n_in, RANK) and tuple(b.shape) == (RANK, n_out)
        assert a.tensor_type == gguf.GGMLQuantizationType.Q4_1
        assert b.tensor_type == gguf.GGMLQuantizationType.F32


def test_writer_is_deterministic_and_checks_targets(smollm_path, adapter_path, tmp_path):
    again = write_lora(smollm_path, tmp_path / "again.gguf", rank=RANK, seed=0, a_type="q4_1")
    assert again.read_bytes() == Path(adapter_path).read_bytes()
    with pytest.raises(ValueError, match="no_such_weight"):
        write_lora(smollm_path, tmp_path / "x.gguf", targets=("attn_q", "no_such_weight"))
    with pytest.raises(ValueError, match="not a multiple of 32"):
        write_lora(smollm_path, tmp_path / "x.gguf", b_type="q4_1")  # B's ne0 is the rank


# ------------------------------------------------------------------- engine, scales


def test_scale_zero_is_the_base_model_and_scale_one_is_not(
    model, adapter_path, prompts, base_tokens, adapted_tokens
):
    with engine_for(model, lora=[(adapter_path, 0.0)]) as eng:
        assert eng.lora_paths == [adapter_path]
        assert eng.lora_scales() == [0.0]
        assert [run_alone(eng, p) for p in prompts] == base_tokens
    assert adapted_tokens[0] != base_tokens[0]
    assert all(len(t) > 0 for t in adapted_tokens)


def test_per_request_scales_match_engine_scales(shared, prompts, base_tokens, adapted_tokens):
    assert [run_alone(shared, p, lora_scales=[1.0]) for p in prompts] == adapted_tokens
    assert [run_alone(shared, p, lora_scales=[0.0]) for p in prompts] == base_tokens


def test_mixed_scales_concurrently_equal_each_alone(shared, prompts, base_tokens, adapted_tokens):
    """Tasks with different scales submitted together: each gets what it gets alone.

    The engine batches only tasks with equal scales and switches adapters when idle."""
    p0, p1 = prompts
    half = run_alone(shared, p0, lora_scales=[0.5])
    jobs = [(p0, 1.0), (p1, 1.0), (p0, 0.0), (p1, 0.0), (p0, 0.5), (p1, 1.0), (p0, 1.0)]
    want = [adapted_tokens[0], adapted_tokens[1], base_tokens[0], base_tokens[1], half]
    want += [adapted_tokens[1], adapted_tokens[0]]
    assert len({tuple(w) for w in want}) == 5  # the scales really give different outputs

    # a fresh AsyncEngine per event loop; AsyncEngine.close() would stop the shared engine
    async def one_by_one():
        ae = AsyncEngine(shared)
        streams = [ae.submit(task(p, lora_scales=[s])) for p, s in jobs]
        done = await asyncio.gather(*[ae.collect(st) for st in streams])
        return [tokens_of(toks) for toks, _ in done]

    async def as_a_group():  # one submit_many
        ae = AsyncEngine(shared)
        group = [task(p, lora_scales=[s]) for p, s in jobs]
        done = await asyncio.gather(*[ae.collect(st) for st in ae.submit_many(group)])
        return [tokens_of(toks) for toks, _ in done]

    for way in (one_by_one, as_a_group):
        before = shared.metrics()
        assert asyncio.run(way()) == want, way.__name__
        m = shared.metrics()
        busy = m["n_busy_slots_total"] - before["n_busy_slots_total"]
        decodes = m["n_decode_total"] - before["n_decode_total"]
        assert busy > decodes  # neighbours with equal scales did share decodes


def test_equal_scales_still_share_batches(shared, prompts, adapted_tokens):
    before = shared.metrics()
    ids = shared.submit_many([task(p, lora_scales=[1.0]) for p in prompts * 2])
    got = []
    for i in ids:
        events = []
        while not (events and events[-1].done):
            events += shared.wait(i, 60_000)
        got.append(tokens_of(events))
    assert got == adapted_tokens * 2
    m = shared.metrics()
    busy = m["n_busy_slots_total"] - before["n_busy_slots_total"]
    decodes = m["n_decode_total"] - before["n_decode_total"]
    assert busy > decodes  # several sequences per decode


def test_switching_scales_never_reuses_kv_of_other_scales(shared, prompts, base_tokens):
    """cache_prompt on: a slot's KV computed under one scale must not serve another."""
    p = prompts[0]
    adapted = list(generate(shared, task(p, lora_scales=[1.0], cache_prompt=True)))
    base = list(generate(shared, task(p, lora_scales=[0.0], cache_prompt=True)))
    assert tokens_of(adapted) != base_tokens[0]
    assert base[-1].n_cached == 0
    assert tokens_of(base) == base_tokens[0]
    # same scale again: the cache is used (so the check above would have seen reuse)
    again = list(generate(shared, task(p, lora_scales=[0.0], cache_prompt=True)))
    assert again[-1].n_cached > 0


def test_lora_scales_round_trip(model, adapter_path, prompts, base_tokens, adapted_tokens):
    with engine_for(model, lora=[(adapter_path, 0.0)]) as eng:
        assert eng.lora_scales() == [0.0]
        eng.set_lora_scales([1.0])
        assert eng.lora_scales() == [1.0]
        assert run_alone(eng, prompts[0]) == adapted_tokens[0]  # tasks without scales
        eng.set_lora_scales([0.25])
        assert eng.lora_scales() == [0.25]
        eng.set_lora_scales([0.0])
        assert eng.lora_scales() == [0.0]
        assert run_alone(eng, prompts[0]) == base_tokens[0]


def test_wrong_number_of_scales_is_refused(model, adapter_path, prompts):
    with engine_for(model, lora=[(adapter_path, 0.5)]) as eng:
        for bad in ([], [1.0, 1.0]):
            # std::invalid_argument crosses pybind11 as ValueError
            with pytest.raises(ValueError, match="expected 1 values"):
                eng.set_lora_scales(bad)
        with pytest.raises(ValueError, match="expected 1 values"):
            eng.submit(task(prompts[0], lora_scales=[1.0, 1.0]))
        assert eng.lora_scales() == [0.5]  # nothing changed
    with engine_for(model) as eng:  # no adapters at all
        assert eng.lora_paths == [] and eng.lora_scales() == []
        eng.set_lora_scales([])
        with pytest.raises(ValueError, match="expected 0 values"):
            eng.set_lora_scales([1.0])
        with pytest.raises(ValueError, match="expected 0 values"):
            eng.submit(task(prompts[0], lora_scales=[1.0]))


def test_two_adapters(
    model, adapter_path, prompts, smollm_path, tmp_path, base_tokens, adapted_tokens
):
    """Two loaded adapters: each scale selects its own; both at 0 is the base model."""
    other = str(write_lora(smollm_path, tmp_path / "other.gguf", rank=2, seed=7, a_type="f16"))
    p = prompts[0]
    with engine_for(model, lora=[(adapter_path, 0.0), (other, 0.0)]) as eng:
        assert eng.lora_paths == [adapter_path, other]
        assert eng.lora_scales() == [0.0, 0.0]
        assert run_alone(eng, p, lora_scales=[0.0, 0.0]) == base_tokens[0]
        assert run_alone(eng, p, lora_scales=[1.0, 0.0]) == adapted_tokens[0]
        second = run_alone(eng, p, lora_scales=[0.0, 1.0])
        both = run_alone(eng, p, lora_scales=[1.0, 1.0])
    assert second != adapted_tokens[0] and both not in (base_tokens[0], second)


# ---------------------------------------------------------------------- bad files


@pytest.fixture(scope="module")
def bad_adapters(smollm_path, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """{case: (path, what the error says)}."""
    d = tmp_path_factory.mktemp("bad-lora")
    rng = np.random.default_rng(1)
    junk = d / "junk.gguf"
    junk.write_bytes(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    truncated = d / "truncated.gguf"
    full = write_lora(smollm_path, d / "full.gguf", targets=("attn_q",))
    truncated.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    qwen = write_lora(smollm_path, d / "qwen2.gguf", targets=("attn_q",), arch="qwen2")
    return {
        "missing": (str(d / "nope.gguf"), "failed to open"),
        "junk": (str(junk), "invalid magic"),
        "truncated": (str(truncated), "not within the file bounds"),
        "other_arch": (str(qwen), "arch mismatch"),
        "the_model_itself": (smollm_path, "expect general.type to be 'adapter'"),
    }


@pytest.mark.parametrize("case", ["missing", "junk", "truncated", "other_arch", "the_model_itself"])
def test_bad_adapter_fails_to_load_with_a_clear_error(model, bad_adapters, case):
    path, says = bad_adapters[case]
    with pytest.raises(_core.LlamaError, match=says) as info:
        _core.LoraAdapter(model, path)
    assert path in str(info.value)
    with pytest.raises(_core.LlamaError, match=says):
        open_engine(model, n_ctx=512, n_threads=2, lora=[(path, 1.0)])


def test_model_still_works_after_a_bad_adapter(
    model, bad_adapters, adapter_path, shared, prompts, base_tokens
):
    for path, _ in bad_adapters.values():
        with pytest.raises(_core.LlamaError):
            open_engine(model, n_ctx=512, n_threads=2, lora=[(adapter_path, 0.0), (path, 1.0)])
    assert run_alone(shared, prompts[0], lora_scales=[0.0]) == base_tokens[0]


# ------------------------------------------------------------- low level: Context


def greedy(ctx: _core.Context, prompt: list[int], n: int) -> list[int]:
    ctx.memory_clear()
    batch = _core.Batch(512, 1)
    batch.add_sequence(prompt, 0, 0, True)
    ctx.decode(batch)
    smpl = _core.Sampler.greedy()
    out: list[int] = []
    for _ in range(n):
        t = smpl.sample(ctx, -1)
        out.append(t)
        batch.clear()
        batch.add(t, len(prompt) + len(out) - 1, [0], True)
        ctx.decode(batch)
    return out


def test_context_set_lora(model, adapter_path, prompts):
    adapter = _core.LoraAdapter(model, adapter_path)
    assert adapter.path == adapter_path
    ctx = _core.Context(model, n_ctx=512, n_threads=2)
    p, n = prompts[0], 8
    base = greedy(ctx, p, n)
    ctx.set_lora([(adapter, 1.0)])
    adapted = greedy(ctx, p, n)
    assert adapted != base
    ctx.set_lora([(adapter, 0.0)])
    assert greedy(ctx, p, n) == base
    # the context keeps an applied adapter alive after the caller drops it
    ctx.set_lora([(adapter, 1.0)])
    del adapter
    assert greedy(ctx, p, n) == adapted
    ctx.set_lora([])
    assert greedy(ctx, p, n) == base
    with pytest.raises(ValueError, match="None"):
        ctx.set_lora([(None, 1.0)])


# ---------------------------------------------------------------- the defaults


def test_per_request_scales_do_not_change_the_defaults(model, adapter_path, prompts, base_tokens):
    with engine_for(model, lora=[(adapter_path, 0.0)]) as eng:
        run_alone(eng, prompts[0], lora_scales=[1.0])
        assert run_alone(eng, prompts[0]) == base_tokens[0]
        assert eng.lora_scales() == [0.0]


def test_new_defaults_do_not_touch_a_running_task(model, adapter_path, prompts):
    """set_lora_scales changes what later tasks get, never a task already decoding."""
    with engine_for(model, lora=[(adapter_path, 0.0)]) as eng:
        long = {"n": 60, "sampling": make_sampling_params(temperature=0, ignore_eos=True)}
        alone = run_alone(eng, prompts[0], **long)
        events = []
        for ev in generate(eng, task(prompts[0], **long)):
            events.append(ev)
            if len(events) == 10:
                eng.set_lora_scales([1.0])
        assert tokens_of(events) == alone
        assert eng.lora_scales() == [1.0]
        eng.set_lora_scales([0.0])
        assert run_alone(eng, prompts[0], **long) == alone
