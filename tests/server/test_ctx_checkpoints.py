"""Context checkpoints (``-ctxcp`` / ``-cms``) and ``--swa-full``, on the two kinds of model
whose memory cannot give back an arbitrary prefix of a cached prompt: a recurrent one (Mamba:
one state per sequence) and a sliding-window one (Gemma 2 with a 16-token window: the SWA
layers' cache holds the window only, unless ``--swa-full``). A prompt sharing part of the
cached one resumes from the state saved a few tokens before the earlier prompt's end, or is
evaluated again from the start. The same text and the same cached counts as llama-server,
started alike, request by request."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fixtures.tiny_mamba import write_mamba_model
from fixtures.tiny_swa import write_swa_model
from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=120)

BASE = "The weather today is bright and the streets are busy with people walking to work"
LONG = BASE + " while the sun rises over the hills"
# each shares a prefix with what the slot holds, then differs (the last, inside the window)
PROMPTS = [BASE, BASE + " while", BASE + " and", LONG, LONG + " and the rivers", BASE + " now"]
FLAGS = ("-c", "1024", "-np", "1", "--cache-ram", "0")
CASES = {
    "mamba": ("mamba", ()),
    "mamba-no-checkpoints": ("mamba", ("-ctxcp", "0")),
    "mamba-one-checkpoint": ("mamba", ("-ctxcp", "1")),
    "swa": ("swa", ()),
    "swa-no-checkpoints": ("swa", ("-ctxcp", "0")),
    "swa-full": ("swa", ("--swa-full",)),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, smollm_path: str) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ckpt")
    return {
        "mamba": write_mamba_model(d / "mamba.gguf", tokenizer_source=smollm_path),
        "swa": write_swa_model(d / "swa.gguf", tokenizer_source=smollm_path),
    }


def _turns(url: str) -> list[tuple[str, int]]:
    out = []
    for prompt in PROMPTS:
        body = {"prompt": prompt, "n_predict": 6, "temperature": 0}
        r = http.post(url + "/completion", json=body)
        assert r.status_code == 200, r.text
        out.append((r.json()["content"], r.json()["timings"]["cache_n"]))
    return out


@pytest.fixture(scope="module")
def runs(models: dict[str, Path]) -> dict[str, tuple[list, list]]:
    out = {}
    for name, (model, extra) in CASES.items():
        args = ("-m", str(models[model]), *FLAGS, *extra)
        with running_server(*args) as ours, running_peer(*args) as peer:
            out[name] = (_turns(ours), _turns(peer))
    return out


@pytest.mark.flag_effect("-ctxcp", "--swa-full")
@pytest.mark.parametrize("name", list(CASES))
def test_same_text_and_cache_as_llama_server(runs: dict, name: str) -> None:
    ours, peer = runs[name]
    assert ours == peer


@pytest.mark.flag_effect("-ctxcp", "--swa-full")
@pytest.mark.parametrize("model", ["mamba", "swa"])
def test_checkpoints_save_evaluation_and_change_no_text(runs: dict, model: str) -> None:
    with_cp, without = runs[model][0], runs[f"{model}-no-checkpoints"][0]
    assert [t for t, _ in with_cp] == [t for t, _ in without]
    assert sum(n for _, n in with_cp) > sum(n for _, n in without)
    if model == "mamba":  # a recurrent state is never cut: every prompt from the start
        assert all(n == 0 for _, n in without)
    else:  # the full-size cache keeps what the window-sized one lost
        full = runs["swa-full"][0]
        assert [t for t, _ in full] == [t for t, _ in with_cp]
        assert sum(n for _, n in full) > sum(n for _, n in with_cp)


# -cms: with the list full, another task's checkpoint within N tokens of an earlier one
# goes first (rather than the oldest); small batches make more checkpoints to choose from
CMS_FLAGS = ("-ctxcp", "4", "-b", "8", "-ub", "8")
CMS_TEXT = (BASE + " while the sun rises over the hills and the rivers ") * 2
CMS_TURNS = [(9, True), (29, False), (25, True), (19, False), (16, False), (31, False)]


def _cms_turns(url: str) -> list[int]:
    tokens = http.post(url + "/tokenize", json={"content": CMS_TEXT}).json()["tokens"]
    out = []
    for n, diverge in CMS_TURNS:
        prompt = tokens[: n - 3] + tokens[5:8] if diverge else tokens[:n]
        r = http.post(
            url + "/completion", json={"prompt": prompt, "n_predict": 2, "temperature": 0}
        )
        assert r.status_code == 200, r.text
        out.append(r.json()["timings"]["cache_n"])
    return out


@pytest.mark.flag_effect("-cms")
def test_checkpoint_min_step_picks_what_is_evicted_as_llama_server(models: dict) -> None:
    got = {}
    for step in ("0", "8192"):
        args = ("-m", str(models["mamba"]), *FLAGS, *CMS_FLAGS, "-cms", step)
        with running_server(*args) as ours, running_peer(*args) as peer:
            got[step] = _cms_turns(ours)
            assert got[step] == _cms_turns(peer)
    assert got["0"] != got["8192"]
