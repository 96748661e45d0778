"""Backend sampling (``-bs`` and a request's ``backend_sampling``): the sampler chain runs
inside the decode graph (llama_set_sampler) and the engine reads the token back. On the
CPU backend the tokens are those of host sampling and of llama-server with ``-bs``, greedy
and seeded alike: llama.cpp's backend ``dist`` stage draws its uniform number from the same
mt19937 stream as the host's (``llama_sampler_dist_backend_set_input``), so the same seed
picks the same token, not merely one from the same distribution. /metrics counts where
each token was picked, which is what shows the flag acting."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

PROMPT = "Once upon a time, in a small village,"
# greedy, and hot at three seeds
CASES: list[dict[str, object]] = [
    {"temperature": 0},
    {"temperature": 0.8, "seed": 1},
    {"temperature": 0.8, "seed": 2},
    {"temperature": 0.8, "seed": 3},
]


def _args(model: str) -> list[str]:
    return ["-m", model, "-c", "1024", "-np", "2", "--metrics"]


@pytest.fixture(scope="module")
def host_url(smollm_path: str) -> Iterator[str]:
    with running_server(*_args(smollm_path)) as url:
        yield url


@pytest.fixture(scope="module")
def bs_url(smollm_path: str) -> Iterator[str]:
    with running_server(*_args(smollm_path), "-bs") as url:
        yield url


def _complete(url: str, **fields: object) -> dict:
    body = {"prompt": PROMPT, "n_predict": 16, "return_tokens": True, **fields}
    r = httpx.post(url + "/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _counters(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30).text
    # pyllama's own counters, labelled with model_name
    found = re.findall(r"^llamacpp:(\w*tokens_sampled_\w+)_total\{[^}]*\} (\S+)$", text, re.M)
    # backend, split, host (and draft_backend)
    return {name.replace("tokens_sampled_", ""): float(v) for name, v in found}


def _moved(url: str, before: dict[str, float]) -> dict[str, float]:
    after = _counters(url)
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def _params(url: str) -> dict:
    return httpx.get(url + "/props", timeout=30).json()["default_generation_settings"]["params"]


@pytest.mark.flag_effect("-bs")
def test_bs_samples_in_the_graph_with_the_same_tokens(host_url: str, bs_url: str) -> None:
    assert _params(host_url)["backend_sampling"] is False
    assert _params(bs_url)["backend_sampling"] is True
    outputs: dict[str, list[list[int]]] = {}
    for name, url in (("host", host_url), ("bs", bs_url)):
        before = _counters(url)
        runs = [_complete(url, **case) for case in CASES]
        outputs[name] = [r["tokens"] for r in runs]
        n = float(sum(r["tokens_predicted"] for r in runs))
        assert n >= 4 * 8
        # every token of the default chain is picked in the graph with -bs, on the host without
        # (with 2 slots greedy too: test_host_greedy_picks_greedy_tokens_on_the_host)
        assert _moved(url, before) == ({"backend": n} if name == "bs" else {"host": n})
        assert all(r["generation_settings"]["backend_sampling"] is (name == "bs") for r in runs)
    assert outputs["bs"] == outputs["host"]


def test_host_greedy_picks_greedy_tokens_on_the_host(smollm_path: str) -> None:
    """With 8 slots or more a greedy request picks in the graph by default (pyllama's CPU
    node, no logits read back) and reports backend_sampling false as asked; --host-greedy
    reads the logits on the host, as llama-server without -bs. The same tokens."""
    args = ["-m", smollm_path, "-c", "2048", "-np", "8", "--metrics"]
    tokens = {}
    for name, extra in (("default", []), ("host", ["--host-greedy"])):
        with running_server(*args, *extra) as url:
            before = _counters(url)
            r = _complete(url, temperature=0)
            n = float(r["tokens_predicted"])
            assert _moved(url, before) == ({"backend": n} if name == "default" else {"host": n})
            assert r["generation_settings"]["backend_sampling"] is False
            tokens[name] = r["tokens"]
    assert tokens["default"] == tokens["host"]


@pytest.mark.flag_effect("-bs")
def test_bs_gives_llama_servers_tokens(smollm_path: str, bs_url: str) -> None:
    ours = [_complete(bs_url, **case)["tokens"] for case in CASES]
    with running_peer(*_args(smollm_path), "-bs") as peer:
        theirs = [_complete(peer, **case)["tokens"] for case in CASES]
        assert _params(peer)["backend_sampling"] is True
    assert ours == theirs


@pytest.mark.flag_effect("-bs")
def test_bs_falls_back_where_llama_server_does(host_url: str, bs_url: str) -> None:
    def run(url: str, **fields: object) -> tuple[dict, dict[str, float]]:
        before = _counters(url)
        r = _complete(url, temperature=0.8, seed=5, **fields)
        return r, _moved(url, before)

    # a grammar and a reasoning budget turn it off for the request (llama-server's
    # common_sampler_init), and generation_settings says so
    r, moved = run(bs_url, grammar='root ::= "yes" | "no" | "maybe"')
    assert moved == {"host": r["tokens_predicted"]}
    assert r["generation_settings"]["backend_sampling"] is False
    budget = {
        "reasoning_budget_start_tag": "<think>",
        "reasoning_budget_end_tag": "</think>",
        "reasoning_budget_tokens": 4,
    }
    r, moved = run(bs_url, **budget)
    assert moved == {"host": r["tokens_predicted"]}
    assert r["generation_settings"]["backend_sampling"] is False
    # probabilities before sampling need every logit on the host; llama-server keeps
    # reporting the request's value
    r, moved = run(bs_url, n_probs=3)
    assert moved == {"host": r["tokens_predicted"]}
    assert r["generation_settings"]["backend_sampling"] is True
    assert all(len(p["top_logprobs"]) == 3 for p in r["completion_probabilities"])
    # after sampling they come from the candidates the graph returns
    r, moved = run(bs_url, n_probs=3, post_sampling_probs=True)
    assert moved == {"backend": r["tokens_predicted"]}
    for p in r["completion_probabilities"]:
        assert 0.0 < p["prob"] <= 1.0 and sum(t["prob"] for t in p["top_probs"]) <= 1.0 + 1e-4
    # a request's own field wins over the default, both ways
    r, moved = run(bs_url, backend_sampling=False)
    assert moved == {"host": r["tokens_predicted"]}
    r, moved = run(host_url, backend_sampling=True)
    assert moved == {"backend": r["tokens_predicted"]}
    assert r["generation_settings"]["backend_sampling"] is True


@pytest.mark.flag_effect("-bs")
def test_bs_splits_the_chain_at_a_host_only_stage(host_url: str, bs_url: str) -> None:
    """A stage with no backend implementation (typical-p below 1) ends the graph's part of
    the chain: the stages before it run in the graph, the host runs the rest."""
    case = {"temperature": 0.8, "seed": 7, "typical_p": 0.9}
    before = _counters(bs_url)
    r = _complete(bs_url, **case)
    assert _moved(bs_url, before) == {"split": r["tokens_predicted"]}
    assert r["tokens"] == _complete(host_url, **case)["tokens"]


@pytest.mark.flag_effect("-bs")
def test_bs_openai_routes_take_the_field(bs_url: str) -> None:
    def post(path: str, **body: object) -> dict[str, float]:
        before = _counters(bs_url)
        r = httpx.post(
            bs_url + path, json={"max_tokens": 8, "temperature": 0.7, **body}, timeout=120
        )
        assert r.status_code == 200, r.text
        return _moved(bs_url, before)

    chat = {"messages": [{"role": "user", "content": "Name a fruit."}]}
    assert set(post("/v1/chat/completions", **chat)) == {"backend"}
    assert set(post("/v1/chat/completions", backend_sampling=False, **chat)) == {"host"}
    # n > 1: each completion samples the shared prompt's last row on the host (llama-server's
    # children would all read the first completion's backend token there)
    assert set(post("/v1/completions", prompt=PROMPT, n=2)) == {"host"}


@pytest.mark.flag_effect("--spec-draft-backend-sampling")
def test_draft_model_picks_in_its_graph(smollm_path: str, host_url: str) -> None:
    greedy = _complete(host_url, temperature=0, n_predict=24)["tokens"]
    draft = [*_args(smollm_path), "-md", smollm_path, "--spec-type", "draft-simple"]
    draft += ["--spec-draft-n-max", "4"]
    seen: dict[bool, float] = {}
    for on in (True, False):
        flag = "--spec-draft-backend-sampling" if on else "--no-spec-draft-backend-sampling"
        with running_server(*draft, flag) as url:
            assert _complete(url, temperature=0, n_predict=24)["tokens"] == greedy
            text = httpx.get(url + "/metrics", timeout=30).text
            seen[on] = _counters(url)["draft_backend"]
            drafted = re.search(r"^llamacpp:spec_decode_num_draft_tokens_total (\S+)$", text, re.M)
            assert drafted is not None and float(drafted[1]) > 0
    assert seen[True] > 0 and seen[False] == 0
