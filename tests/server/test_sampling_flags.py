"""llama-server's sampling options (--top-k ... --json-schema-file) as the defaults of every
request, which a request's own fields override: their effects on real generations."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from helpers.servers import running_server

PROMPT = "Once upon a time, in a small village,"


def _complete(url: str, **fields: object) -> dict:
    body = {"prompt": PROMPT, "n_predict": 12, **fields}
    r = httpx.post(url + "/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.flag_effect("--top-k")
def test_top_k_1_makes_every_request_greedy(smollm_path: str) -> None:
    with running_server(
        "-m", smollm_path, "-c", "1024", "-np", "1", "--top-k", "1", "--temp", "1.5"
    ) as url:
        a = _complete(url)["content"]
        b = _complete(url, seed=123)["content"]
        greedy = _complete(url, temperature=0)["content"]
        assert a == b == greedy  # top-k 1 leaves one candidate, whatever the seed
        # a request's own top_k wins: hot sampling now differs between seeds
        hot = {_complete(url, top_k=0, seed=s)["content"] for s in range(4)}
        assert len(hot) > 1
        params = httpx.get(url + "/props").json()["default_generation_settings"]["params"]
        assert params["top_k"] == 1 and params["temperature"] == pytest.approx(1.5)


@pytest.mark.flag_effect("--grammar-file", "--logit-bias")
def test_grammar_file_and_logit_bias_defaults(smollm_path: str, tmp_path: Path) -> None:
    grammar = tmp_path / "yes.gbnf"
    grammar.write_text('root ::= "yes" | "no"\n')
    with running_server(
        "-m", smollm_path, "-c", "1024", "-np", "1", "--grammar-file", str(grammar)
    ) as url:
        assert _complete(url, temperature=0)["content"] in ("yes", "no")
        own = _complete(url, temperature=0, grammar='root ::= "maybe"')["content"]
        assert own == "maybe"  # the request's grammar wins
    with running_server("-m", smollm_path, "-c", "1024", "-np", "1") as url:
        first = _complete(url, temperature=0, n_predict=1, n_probs=1)["completion_probabilities"][
            0
        ]["id"]
    with running_server("-m", smollm_path, "-c", "1024", "-np", "1", "-l", f"{first}-inf") as url:
        out = _complete(url, temperature=0, n_predict=4, n_probs=1)
        assert all(p["id"] != first for p in out["completion_probabilities"])
        bias = httpx.get(url + "/props").json()["default_generation_settings"]["params"][
            "logit_bias"
        ]
        assert {"token": first, "bias": None} in bias  # -inf goes out as null


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--logit-bias", "hello"], "--logit-bias: expected TOKEN_ID(+/-)BIAS"),
        (["--grammar-file", "/nonexistent/g.gbnf"], "--grammar-file: cannot read"),
        (["--json-schema", "{not json"], "--json-schema: not JSON"),
        (["--sampler-seq", "kq"], "unknown sampler letter(s) q"),
        (["--grammar", "root ::= x", "-j", "{}"], "cannot both be given"),
        (["--top-k", "many"], "--top-k: invalid int value"),
    ],
)
def test_bad_sampling_options_name_themselves(args: list[str], message: str) -> None:
    r = subprocess.run(  # from elsewhere: the source tree has no compiled module
        [sys.executable, "-m", "pyllama.server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode == 2
    assert message in r.stderr
