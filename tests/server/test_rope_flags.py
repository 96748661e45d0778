"""The RoPE scaling options act: the first token's top log-probabilities after a fixed prompt
move with --rope-scaling yarn and with each YaRN parameter on top of it (with
--yarn-attn-factor alone: YaRN's own scaling overrides it), and all together they are
llama-server's for the same command line."""

from __future__ import annotations

import httpx
import pytest

from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy

PROMPT = "The capital of France is Paris. The capital of Germany is"
YARN = ["--rope-scaling", "yarn", "--rope-scale", "4"]


def top_logprobs(cmd: list[str]) -> list[tuple[str, float]]:
    proc, url = start_process(cmd)
    try:
        wait_healthy(url, proc)
        body = {"prompt": PROMPT, "n_predict": 1, "temperature": 0, "n_probs": 3}
        r = httpx.post(url + "/completion", json=body, timeout=60)
        assert r.status_code == 200, r.text
        top = r.json()["completion_probabilities"][0]["top_logprobs"]
        return [(p["token"], round(p["logprob"], 3)) for p in top]
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def ours(smollm_path: str):
    common = ["-m", smollm_path, "-c", "512", "-t", "2", "--no-warmup"]
    return lambda *flags: top_logprobs([*PYLLAMA_SERVER, *common, *flags])


@pytest.fixture(scope="module")
def plain_and_yarn(ours) -> tuple[list, list]:
    return ours(), ours(*YARN)


@pytest.mark.flag_effect("--rope-scaling")
def test_yarn_scaling_moves_the_logprobs(plain_and_yarn: tuple[list, list]) -> None:
    plain, yarn = plain_and_yarn
    assert plain != yarn, plain


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(["--yarn-ext-factor", "0.5"], marks=pytest.mark.flag_effect("--yarn-ext-factor")),
        pytest.param(["--yarn-beta-slow", "2"], marks=pytest.mark.flag_effect("--yarn-beta-slow")),
        pytest.param(["--yarn-beta-fast", "16"], marks=pytest.mark.flag_effect("--yarn-beta-fast")),
        pytest.param(["--yarn-orig-ctx", "2048"], marks=pytest.mark.flag_effect("--yarn-orig-ctx")),
    ],
)  # fmt: skip
def test_each_yarn_parameter_moves_them(
    ours, plain_and_yarn: tuple[list, list], flags: list[str]
) -> None:
    assert ours(*YARN, *flags) != plain_and_yarn[1]


@pytest.mark.flag_effect("--yarn-attn-factor")
def test_attention_factor_moves_them_without_yarn(ours, plain_and_yarn: tuple[list, list]) -> None:
    assert ours("--yarn-attn-factor", "0.8") != plain_and_yarn[0]


@pytest.mark.flag_effect("--rope-scaling", "--yarn-ext-factor", "--yarn-beta-slow")
def test_yarn_is_llama_servers(smollm_path: str, ours) -> None:
    flags = [*YARN, "--yarn-ext-factor", "0.5", "--yarn-beta-slow", "2", "--yarn-beta-fast", "16"]
    flags += ["--yarn-orig-ctx", "2048", "--yarn-attn-factor", "0.8"]
    common = ["-m", smollm_path, "-c", "512", "-t", "2", "--no-warmup", "--no-webui"]
    assert ours(*flags) == top_logprobs([str(require_peer()), *common, *flags])
