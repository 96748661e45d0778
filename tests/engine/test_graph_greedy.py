"""`-bs` with a plain greedy task: pyllama's argmax stage picks each token inside the graph
(csrc/engine/graph_greedy.cpp: on the CPU one custom node, on all of ggml's threads, picks
every greedy sequence's row with the vectorised biased argmax, where llama.cpp's own greedy
stage is a scalar one-thread GGML_OP_ARGMAX per sequence behind a copy of all the logits).
The tokens are the host path's, the logit bias and ignore_eos included, in a wave of
sequences sampled both ways at once too, and the counters say the graph picked every one.
Engines here pick greedy tokens on the host unless asked (``graph_greedy=False``); the last
tests check the default, where greedy tasks pick in the graph on the CPU without -bs."""

from __future__ import annotations

import asyncio
import math

import pytest

from pyllama import _core
from pyllama.engine import AsyncEngine, generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

PROMPT = "Once upon a time, in a small village,"


@pytest.fixture(scope="module")
def model(smollm_path: str) -> _core.Model:
    return _core.Model(smollm_path, n_gpu_layers=0)  # the CPU backend's node is under test


def _run(
    model: _core.Model, backend: bool, n: int = 24, prompt: str = PROMPT, **kw: object
) -> tuple[list[int], dict]:
    eng = open_engine(model, graph_greedy=False, n_parallel=2, n_ctx=1024, n_threads=2)
    try:
        sampling = make_sampling_params(temperature=0, **kw)
        sampling.backend_sampling = backend
        tokens = model.tokenize(prompt, True, True)
        events = list(generate(eng, make_task(tokens, n_predict=n, sampling=sampling)))
        assert not [e.message for e in events if e.type == "error"]
        return [e.token for e in events if e.type == "token" and e.token >= 0], eng.metrics()
    finally:
        eng.stop()


@pytest.fixture(scope="module")
def plain(model: _core.Model) -> list[int]:
    return _run(model, False)[0]


def _same_in_the_graph(model: _core.Model, **kw: object) -> list[int]:
    host, m_host = _run(model, False, **kw)
    graph, m = _run(model, True, **kw)
    assert graph == host
    assert m_host["n_sampled_backend"] == 0
    assert m["n_sampled_backend"] == len(graph) and m["n_sampled_host"] == 0
    # pyllama's node picked them, each once
    assert m_host["n_graph_greedy_rows"] == 0 and m["n_graph_greedy_rows"] == len(graph)
    return graph


def test_greedy_in_the_graph_keeps_the_host_tokens(model: _core.Model, plain: list[int]) -> None:
    assert _same_in_the_graph(model) == plain


def test_greedy_in_the_graph_applies_the_logit_bias(model: _core.Model, plain: list[int]) -> None:
    # the third token forbidden: the answer must part from the plain one there
    tokens = _same_in_the_graph(model, logit_bias={plain[2]: -math.inf})
    assert tokens[:2] == plain[:2] and tokens[2] != plain[2]


def test_greedy_in_the_graph_ignores_eos(model: _core.Model) -> None:
    # a chat turn that ends at once; ignore_eos's -inf bias on the EOG tokens, read by the
    # graph's stage, carries it on to the limit
    chat = "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"
    assert len(_run(model, True, n=96, prompt=chat)[0]) < 96
    tokens = _same_in_the_graph(model, ignore_eos=True, n=96, prompt=chat)
    assert len(tokens) == 96 and not [t for t in tokens if model.is_eog(t)]


LONG = " ".join(f"item {i} is number {i * 7 % 13}." for i in range(40))


def _together(ae: AsyncEngine, tasks: list) -> list:
    """The tasks submitted in one turn (their prompts share the first batch), each one's
    (events, final) once all are done."""

    async def go() -> list:
        return await asyncio.gather(*[ae.collect(s) for s in ae.submit_many(tasks)])

    return asyncio.run(go())


def _wave(model: _core.Model, runs: list[tuple[str, bool, dict]]) -> tuple[list[list[int]], dict]:
    """Every (prompt, backend, sampling fields) task started together in one engine; a small
    batch so that the long prompt takes several steps while the others generate (its
    stage attached, idle: llama.cpp points an idle sequence's stage at row 0)."""
    eng = open_engine(
        model,
        graph_greedy=False,
        n_parallel=len(runs),
        n_ctx=4096,
        n_batch=64,
        n_ubatch=64,
        n_threads=2,
    )
    ae = AsyncEngine(eng)
    try:
        tasks = []
        for prompt, backend, kw in runs:
            sampling = make_sampling_params(temperature=0, **kw)
            sampling.backend_sampling = backend
            tasks.append(
                make_task(model.tokenize(prompt, True, True), n_predict=24, sampling=sampling)
            )
        out = []
        for events, final in _together(ae, tasks):
            assert final.type != "error", final.message
            out.append([e.token for e in events if e.type == "token" and e.token >= 0])
        return out, eng.metrics()
    finally:
        ae.close()
        eng.stop()


def test_one_node_picks_a_wave_of_sequences(model: _core.Model, plain: list[int]) -> None:
    """Sequences with their own biases, one sampled on the host beside them, one whose long
    prompt is still being read: the graph's picks are the host's for each row."""
    runs = [
        (PROMPT, True, {}),
        (PROMPT, True, {"logit_bias": {plain[1]: -math.inf}}),
        ("The capital of France is", True, {}),
        (PROMPT, False, {}),
        (LONG, True, {}),
    ]
    host, m_host = _wave(model, [(p, False, kw) for p, _, kw in runs])
    graph, m = _wave(model, runs)
    assert graph == host
    assert graph[1][:1] == plain[:1] and graph[1][1] != plain[1]
    assert m_host["n_graph_greedy_rows"] == 0
    assert m["n_sampled_host"] == len(graph[3])
    assert m["n_sampled_backend"] == sum(map(len, graph)) - len(graph[3])
    # one pick a sampled row: none for the long prompt's sequence while it had no row
    assert m["n_graph_greedy_rows"] == m["n_sampled_backend"]


def test_a_parked_stage_serves_the_next_task_or_lets_go(
    model: _core.Model, plain: list[int]
) -> None:
    """A task's end leaves its greedy stage on the sequence (attaching costs llama.cpp a
    scheduler reserve); the slot's next task takes it with its own bias, and any other kind
    of task has it detached first: a stage left on would keep the raw logits from the host
    sampler."""
    ban = {plain[1]: -math.inf}
    chat = "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"
    runs: list[tuple[str, bool, dict]] = [
        (PROMPT, True, {}),
        (PROMPT, True, {"logit_bias": ban}),
        (PROMPT, False, {}),
        (chat, True, {"ignore_eos": True}),
        (PROMPT, True, {"temperature": 0.8, "seed": 3}),
        (PROMPT, True, {}),
    ]
    eng = open_engine(model, graph_greedy=False, n_parallel=1, n_ctx=1024, n_threads=2)
    ref = open_engine(model, graph_greedy=False, n_parallel=1, n_ctx=1024, n_threads=2)
    try:
        for prompt, backend, kw in runs:
            tokens = model.tokenize(prompt, True, True)
            got = []
            for e, bs in ((eng, backend), (ref, False)):
                sampling = make_sampling_params(**{"temperature": 0, **kw})
                sampling.backend_sampling = bs
                events = list(generate(e, make_task(tokens, n_predict=16, sampling=sampling)))
                assert not [ev.message for ev in events if ev.type == "error"]
                got.append([ev.token for ev in events if ev.type == "token" and ev.token >= 0])
            assert got[0] == got[1], (prompt, backend, kw)
        m = eng.metrics()
        assert m["n_graph_greedy_rows"] == 16 * 4  # the four -bs greedy tasks' picks, no others
        assert m["n_sampled_host"] == 16 and m["n_sampled_backend"] == 16 * 5
    finally:
        eng.stop()
        ref.stop()


def _n2(model: _core.Model, park: bool) -> tuple[dict[int, list[int]], dict]:
    eng = open_engine(model, graph_greedy=False, n_parallel=2, n_ctx=1024, n_threads=2)
    ae = AsyncEngine(eng)
    tokens = model.tokenize(PROMPT, True, True)
    sampling = make_sampling_params(temperature=0)
    sampling.backend_sampling = park

    try:
        if park:  # a -bs greedy task on each slot leaves a stage parked on both
            _together(ae, [make_task(tokens, n_predict=8, sampling=sampling) for _ in range(2)])
        [(events, final)] = _together(
            ae, [make_task(tokens, n_predict=16, sampling=sampling, n_cmpl=2)]
        )
        assert final.type != "error", final.message
        out: dict[int, list[int]] = {0: [], 1: []}
        for e in events:
            if e.type == "token" and e.token >= 0:
                out[e.index].append(e.token)
        return out, eng.metrics()
    finally:
        ae.close()
        eng.stop()


def test_n_completions_let_parked_stages_go(model: _core.Model) -> None:
    """n > 1 samples on the host (the second completion reads the first's prompt row): both
    slots' parked stages are detached first, or the graph would take their rows."""
    host, _ = _n2(model, False)
    after, m = _n2(model, True)
    assert after == host and len(after[0]) == 16
    assert m["n_graph_greedy_rows"] == 16 and m["n_sampled_host"] == 32


def _default_engine(
    model: _core.Model, n_probs: int = 0, n_parallel: int = 8, **kw: object
) -> tuple[list[int], dict]:
    # graph_greedy: the default
    eng = open_engine(model, n_parallel=n_parallel, n_ctx=8 * 256, n_threads=2)
    try:
        sampling = make_sampling_params(**{"temperature": 0, **kw})
        tokens = model.tokenize(PROMPT, True, True)
        task = make_task(tokens, n_predict=24, sampling=sampling, n_probs=n_probs)
        events = list(generate(eng, task))
        assert not [e.message for e in events if e.type == "error"]
        return [e.token for e in events if e.type == "token" and e.token >= 0], eng.metrics()
    finally:
        eng.stop()


def test_greedy_picks_in_the_graph_by_default(model: _core.Model, plain: list[int]) -> None:
    """Without -bs (backend_sampling false, llama-server's default) a plain greedy task
    still picks in the graph on the CPU, on an engine of 8 slots or more: the host's tokens,
    no logits row read back. Below 8 the host picks (a slot switching between greedy and
    sampled tasks would pay a scheduler reserve each time for little)."""
    tokens, m = _default_engine(model)
    assert tokens == plain
    assert m["n_graph_greedy_rows"] == len(tokens) == m["n_sampled_backend"]
    assert m["n_sampled_host"] == 0
    tokens, m = _default_engine(model, n_parallel=7)
    assert tokens == plain
    assert m["n_graph_greedy_rows"] == 0 and m["n_sampled_host"] == len(tokens)


@pytest.mark.parametrize(
    "kw", [{"temperature": 0.8, "seed": 3}, {"n_probs": 2}], ids=["sampling", "n_probs"]
)
def test_other_tasks_stay_on_the_host_by_default(model: _core.Model, kw: dict) -> None:
    """Sampling, and greedy with probabilities wanted (n_probs), read the logits on the host."""
    tokens, m = _default_engine(model, **kw)
    assert tokens and m["n_graph_greedy_rows"] == 0 and m["n_sampled_backend"] == 0
