"""Backend sampling in the engine with speculative decoding: the target verifies a draft
from rows its graph sampled (several rows of one sequence per batch: llama.cpp's
transactional dist draws), and the draft model picks from the top 10 its own graph kept.
The tokens are those of plain host sampling."""

from __future__ import annotations

import pytest

from pyllama import _core
from pyllama.engine import generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

CASES = [{"temperature": 0}, {"temperature": 0.8, "seed": 3}]


@pytest.fixture(scope="module")
def model(smollm_path: str) -> _core.Model:
    return _core.Model(smollm_path)


def _tokens(engine: _core.Engine, model: _core.Model, backend: bool, **kw: object) -> list[int]:
    sampling = make_sampling_params(**kw)
    sampling.backend_sampling = backend
    prompt = model.tokenize("Once upon a time, in a small village,", True, True)
    events = list(generate(engine, make_task(prompt, n_predict=32, sampling=sampling)))
    assert not [e.message for e in events if e.type == "error"]
    return [e.token for e in events if e.type == "token" and e.token >= 0]


def test_speculative_backend_sampling_keeps_the_tokens(model: _core.Model) -> None:
    plain = open_engine(model, n_parallel=1, n_ctx=1024, n_threads=2)
    try:
        want = [_tokens(plain, model, False, **case) for case in CASES]
        assert plain.metrics()["n_sampled_backend"] == 0
    finally:
        plain.stop()
    spec = open_engine(
        model,
        n_parallel=1,
        n_ctx=1024,
        n_threads=2,
        draft_model=model,
        spec_n_max=4,
        draft_backend_sampling=True,
    )
    try:
        got = [_tokens(spec, model, True, **case) for case in CASES]
        m = spec.metrics()
    finally:
        spec.stop()
    assert got == want
    assert m["n_draft_accepted"] > 0  # rows after the first were verified from the graph
    assert m["n_sampled_backend"] == m["n_predicted_total"] and m["n_sampled_host"] == 0
    assert m["n_draft_sampled_backend"] > 0
