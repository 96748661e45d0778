"""/infill and /rerank through real HTTP, on models derived from the real ones
(tests/helpers/derived_models.py): SmolLM2 with FIM tokens declared, MiniLM with a rank head."""

from __future__ import annotations

import json

import httpx
import pytest

from pyllama import _core
from pyllama.models import embedding_model
from pyllama.server.protocols.native.infill import infill_tokens
from pyllama.server.protocols.native.rerank import rerank_tokens

from helpers.derived_models import FIM_TOKENS, fim_model, rerank_model
from helpers.servers import running_server

http = httpx.Client(timeout=120.0)
DOCS = ["A cat sat on the mat.", "Stock markets fell today.", "Kittens are young cats."]


@pytest.fixture(scope="module")
def fim_path(smollm_path: str) -> str:
    return fim_model(smollm_path)


@pytest.fixture(scope="module")
def fim_server(fim_path: str):
    with running_server("-m", fim_path, "-t", "2", "-c", "4096", "-np", "2") as url:
        yield url


def test_infill_prompt_layout(fim_path: str):
    """llama-server's repo-level layout: extra chunks, then [PRE]prefix[SUF]suffix[MID]."""
    m = _core.Model(fim_path, vocab_only=True)
    tok = lambda s: m.tokenize(s, False, False)  # noqa: E731
    got = infill_tokens(
        m,
        "def add(a, b):\n",
        "\nprint(add(1, 2))\n",
        [{"filename": "util.py", "text": "import math\n"}],
        [],
        n_batch=2048,
        n_predict=16,
        n_ctx=4096,
    )
    f = FIM_TOKENS
    want = [
        f["fim_rep"],
        *tok("myproject\n"),
        f["fim_sep"],
        *tok("util.py\n"),
        *tok("import math\n"),
    ]
    want += [f["fim_sep"], *tok("filename\n")]
    want += [f["fim_pre"], *tok("def add(a, b):\n"), f["fim_suf"], *tok("\nprint(add(1, 2))\n")]
    want += [f["fim_mid"]]
    assert got == want
    spm = infill_tokens(m, "P", "S", [], [], n_batch=2048, n_predict=16, n_ctx=4096, spm=True)
    assert spm.index(f["fim_suf"]) < spm.index(f["fim_pre"])  # suffix first


def test_infill_generates_and_streams(fim_server: str):
    body = {
        "input_prefix": "def add(a, b):\n    return ",
        "input_suffix": "\n\nprint(add(1, 2))\n",
        "input_extra": [{"filename": "util.py", "text": "import math\n"}],
        "n_predict": 8,
        "temperature": 0,
    }
    r = http.post(fim_server + "/infill", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert isinstance(out["content"], str) and 0 < out["tokens_predicted"] <= 8
    assert out["tokens_evaluated"] > 20  # the extra chunk and both sides were evaluated
    with http.stream("POST", fim_server + "/infill", json={**body, "stream": True}) as s:
        text = "".join(
            json.loads(line[6:]).get("content", "")
            for line in s.iter_lines()
            if line.startswith("data: ")
        )
    assert text == out["content"]


def test_infill_errors(server: str, fim_server: str):
    r = http.post(server + "/infill", json={"input_prefix": "a", "input_suffix": "b"})
    assert r.status_code == 501
    assert r.json()["error"]["message"].startswith("Infill is not supported by this model")
    r = http.post(
        fim_server + "/infill",
        json={"input_prefix": "a", "input_suffix": "b", "input_extra": [{"filename": "x"}]},
    )
    assert r.status_code == 400 and '"text"' in r.json()["error"]["message"]
    r = http.post(fim_server + "/infill", json={"input_suffix": "b"})
    assert r.status_code == 400 and "input_prefix" in r.json()["error"]["message"]


@pytest.fixture(scope="module")
def rerank_path() -> str:
    return rerank_model(embedding_model())


@pytest.fixture(scope="module")
def rerank_server(rerank_path: str):
    with running_server("-m", rerank_path, "-t", "2", "--reranking", "-c", "2048") as url:
        yield url


@pytest.mark.flag_effect("--reranking")
def test_rerank_scores_are_the_models(rerank_server: str, rerank_path: str):
    r = http.post(
        rerank_server + "/v1/rerank", json={"query": "cats", "documents": DOCS, "top_n": 2}
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["object"] == "list" and len(out["results"]) == 2
    scores = [x["relevance_score"] for x in out["results"]]
    assert scores == sorted(scores, reverse=True)
    assert out["usage"]["prompt_tokens"] > 0
    # each score is the rank head's output for [CLS] query [SEP] doc [SEP], computed directly
    model = _core.Model(rerank_path)
    eng = _core.Engine(model, n_parallel=1, n_ctx=512, embeddings=True, pooling=4, n_threads=2)
    try:
        for row in out["results"]:
            t = _core.TaskParams()
            t.kind = _core.TaskKind.RERANK
            t.prompt = rerank_tokens(model, "cats", DOCS[row["index"]])
            (final,) = [e for e in eng.wait(eng.submit(t), 30000) if e.type == "final"]
            assert abs(final.embedding[0] - row["relevance_score"]) < 1e-4
    finally:
        eng.stop()


def test_rerank_tei_shape_aliases_and_errors(rerank_server: str, server: str):
    tei = http.post(
        rerank_server + "/rerank", json={"query": "cats", "texts": DOCS, "return_text": True}
    )
    rows = tei.json()
    assert isinstance(rows, list) and {r["text"] for r in rows} == set(DOCS)
    assert all("score" in r for r in rows)
    for path in ("/reranking", "/v1/reranking"):
        assert (
            http.post(rerank_server + path, json={"query": "q", "documents": ["d"]}).status_code
            == 200
        )
    assert http.post(rerank_server + "/rerank", json={"documents": DOCS}).status_code == 400
    assert (
        http.post(rerank_server + "/rerank", json={"query": "q", "documents": []}).status_code
        == 400
    )
    r = http.post(server + "/rerank", json={"query": "q", "documents": ["d"]})
    assert r.status_code == 501 and "--reranking" in r.json()["error"]["message"]
