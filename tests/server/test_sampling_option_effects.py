"""The sampling options test_sampling_defaults.py leaves out (--sampling-seq, --ignore-eos,
--dry-sequence-breaker, --adaptive-target, --adaptive-decay, --grammar, --json-schema,
--json-schema-file) as every request's default: the text generated at a seed is the text a
request asking for that value gets, and not the text of the option's default."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=120)

PROMPT = "The cat sat on the mat. The cat sat on the mat. The dog ran to the"
SAMPLERS = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc"]
SAMPLERS.append("temperature")
BREAKERS = ["\n", ":", '"', "*"]  # llama-server's default DRY sequence breakers
ADAPTIVE = ["top_k", "adaptive_p"]
# the fields the options under test set, at llama-server's defaults, at a warm temperature
NEUTRAL: dict[str, Any] = {
    "temperature": 1.0,
    "samplers": SAMPLERS,
    "dry_multiplier": 0.0,
    "dry_sequence_breakers": BREAKERS,
    "adaptive_target": -1.0,
    "adaptive_decay": 0.9,
    "seed": 11,
}


def _case(mark: Any, arg: str, field: str, value: Any, other: Any, **enable: Any) -> Any:
    """``FLAG arg`` (the flag ``mark`` names) sets request field ``field`` to ``value``;
    ``other`` gives other text; ``enable``: the fields that make the option matter."""
    flag = mark.args[0]
    return pytest.param(flag, arg, field, value, other, enable, id=flag, marks=mark)


CASES = [
    _case(
        pytest.mark.flag_effect("--sampling-seq"),
        "kt",
        "samplers",
        ["top_k", "temperature"],
        SAMPLERS,
    ),
    _case(
        pytest.mark.flag_effect("--dry-sequence-breaker"),
        " ",
        "dry_sequence_breakers",
        [" "],
        BREAKERS,
        dry_multiplier=0.8,
        dry_allowed_length=1,
    ),
    _case(
        pytest.mark.flag_effect("--adaptive-target"),
        "0.3",
        "adaptive_target",
        0.3,
        -1.0,
        samplers=ADAPTIVE,
    ),
    _case(
        pytest.mark.flag_effect("--adaptive-decay"),
        "0.2",
        "adaptive_decay",
        0.2,
        0.9,
        samplers=ADAPTIVE,
        adaptive_target=0.3,
    ),
]


@pytest.fixture(scope="module")
def server(smollm_path: str) -> Iterator[str]:
    args = [arg for p in CASES for arg in p.values[:2]]
    with running_server("-m", smollm_path, "-t", "2", "-c", "512", "-np", "1", *args) as url:
        yield url


def _reply(url: str, fields: dict[str, Any], prompt: str = PROMPT, n: int = 16) -> dict:
    r = http.post(url + "/completion", json={"prompt": prompt, "n_predict": n, **fields})
    assert r.status_code == 200, r.text
    return r.json()


def _text(url: str, fields: dict[str, Any]) -> str:
    return _reply(url, fields)["content"]


@pytest.mark.parametrize(("flag", "arg", "field", "value", "other", "enable"), CASES)
def test_option_is_every_requests_default(
    server: str, flag: str, arg: str, field: str, value: Any, other: Any, enable: dict
) -> None:
    params = http.get(server + "/props").json()["default_generation_settings"]["params"]
    assert params[field] == pytest.approx(value)
    fields = {k: v for k, v in NEUTRAL.items() if k != field} | enable
    from_flag = _reply(server, fields)
    assert from_flag["generation_settings"][field] == pytest.approx(value)
    assert from_flag["content"] == _text(server, {**fields, field: value})
    assert from_flag["content"] != _text(server, {**fields, field: other}), f"{flag} acts not"


@pytest.mark.flag_effect("--adaptive-target", "--adaptive-decay", "--sampling-seq")
def test_adaptive_p_text_is_llama_servers(smollm_path: str) -> None:
    """The adaptive-p sampler from the command line: llama-server's text at a seed, which
    the same server without the options does not give."""
    base = ("-m", smollm_path, "-t", "2", "-c", "512", "-np", "1", "--temp", "1", "-s", "11")
    flags = ("--sampling-seq", "ka", "--adaptive-target", "0.3", "--adaptive-decay", "0.2")
    with running_server(*base, *flags) as ours, running_peer(*base, *flags) as peer:
        text = _text(ours, {})
        assert text == _text(peer, {})
    with running_server(*base) as plain:
        assert text != _text(plain, {})


CHAT = "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.flag_effect("--ignore-eos")
def test_ignore_eos_generates_past_the_end(smollm_path: str) -> None:
    args = ("-m", smollm_path, "-t", "2", "-c", "512", "-np", "1")
    with running_server(*args) as url:
        ends = _reply(url, {"temperature": 0}, CHAT, 48)
    assert ends["stop_type"] == "eos" and ends["tokens_predicted"] < 48
    with running_server(*args, "--ignore-eos") as url:
        assert http.get(url + "/props").json()["default_generation_settings"]["params"][
            "ignore_eos"
        ]
        past = _reply(url, {"temperature": 0}, CHAT, 48)
        assert past["stop_type"] == "limit" and past["tokens_predicted"] == 48
        assert past["content"].startswith(ends["content"])
        own = _reply(url, {"temperature": 0, "ignore_eos": False}, CHAT, 48)
        assert own["content"] == ends["content"]  # the request's own ignore_eos wins


COLOURS = {"enum": ["red", "green", "blue"]}


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(
            ["--grammar", 'root ::= "\\"red\\"" | "\\"green\\"" | "\\"blue\\""'],
            id="--grammar",
            marks=pytest.mark.flag_effect("--grammar"),
        ),
        pytest.param(
            ["--json-schema", json.dumps(COLOURS)],
            id="--json-schema",
            marks=pytest.mark.flag_effect("--json-schema"),
        ),
        pytest.param(
            ["--json-schema-file", "SCHEMA_FILE"],
            id="--json-schema-file",
            marks=pytest.mark.flag_effect("--json-schema-file"),
        ),
    ],
)
def test_constraint_options_bind_every_request(
    smollm_path: str, tmp_path: Path, flags: list[str]
) -> None:
    schema = tmp_path / "colours.json"
    schema.write_text(json.dumps(COLOURS))
    flags = [str(schema) if f == "SCHEMA_FILE" else f for f in flags]
    prompt = "My favourite colour is"
    with running_server("-m", smollm_path, "-t", "2", "-c", "512", "-np", "1", *flags) as url:
        for seed in (1, 2):
            out = _reply(url, {"temperature": 1.0, "seed": seed}, prompt, 8)["content"]
            assert json.loads(out) in COLOURS["enum"]
        own = _reply(url, {"temperature": 0, "grammar": 'root ::= "maybe"'}, prompt, 8)
        assert own["content"] == "maybe"  # the request's own grammar wins


@pytest.mark.flag_effect("--repeat-penalty", "--dry-multiplier")
def test_penalties_see_the_prompt_as_llama_server(smollm_path: str) -> None:
    base = ("-m", smollm_path, "-t", "2", "-c", "512", "-np", "1")
    penalties = [{"repeat_penalty": 1.8}, {"dry_multiplier": 0.5, "dry_allowed_length": 1}]
    with running_server(*base) as ours, running_peer(*base) as peer:
        for fields in penalties:
            body = {"temperature": 1.0, "seed": 11, **fields}
            assert _text(ours, body) == _text(peer, body), fields
