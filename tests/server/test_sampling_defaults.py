"""Each sampling option on the command line is the default of every request, as in
llama-server: /props reports it, and the text generated at a seed is the text a request
asking for that value gets, not the text of the option's default. One server carries all
the options; each case overrides every other sampling field in its requests, so only the
option under test comes from the command line (if it were ignored, the text would be the
default's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from helpers.servers import running_server

http = httpx.Client(timeout=120)

PROMPT = "The cat sat on the mat. The cat sat on the mat. The dog ran to the"
SAMPLERS = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc"]
SAMPLERS.append("temperature")

# every sampling field at llama-server's default, but a warmer temperature (more varied text)
NEUTRAL: dict[str, Any] = {
    "temperature": 1.0,
    "top_k": 40,
    "top_p": 0.95,
    "min_p": 0.05,
    "top_n_sigma": -1.0,
    "typical_p": 1.0,
    "xtc_probability": 0.0,
    "xtc_threshold": 0.1,
    "repeat_last_n": 64,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "dry_base": 1.75,
    "dry_allowed_length": 2,
    "dry_penalty_last_n": 64,
    "adaptive_target": -1.0,
    "adaptive_decay": 0.9,
    "dynatemp_range": 0.0,
    "dynatemp_exponent": 1.0,
    "mirostat": 0,
    "mirostat_tau": 5.0,
    "mirostat_eta": 0.1,
    "samplers": SAMPLERS,
    "seed": 11,
}


def _case(mark: Any, arg: str, field: str, value: Any, other: Any, **enable: Any) -> Any:
    """``FLAG arg`` (the flag ``mark`` names) sets request field ``field`` to ``value``;
    ``other`` is a value that gives other text; ``enable``: the fields that make the option
    matter."""
    flag = mark.args[0]
    return pytest.param(flag, arg, field, value, other, enable, id=flag, marks=mark)


CASES = [
    _case(pytest.mark.flag_effect("--temp"), "1.7", "temperature", 1.7, 0.8),
    _case(pytest.mark.flag_effect("--top-k"), "3", "top_k", 3, 40),
    _case(pytest.mark.flag_effect("--top-p"), "0.5", "top_p", 0.5, 0.95),
    _case(pytest.mark.flag_effect("--min-p"), "0.2", "min_p", 0.2, 0.05),
    _case(
        pytest.mark.flag_effect("--top-nsigma"),
        "0.5",
        "top_n_sigma",
        0.5,
        -1.0,
        top_k=0,
        min_p=0.0,
        top_p=1.0,
    ),
    _case(pytest.mark.flag_effect("--typical"), "0.5", "typical_p", 0.5, 1.0),
    _case(
        pytest.mark.flag_effect("--xtc-probability"),
        "1.0",
        "xtc_probability",
        1.0,
        0.0,
        xtc_threshold=0.05,
    ),
    _case(
        pytest.mark.flag_effect("--xtc-threshold"),
        "0.05",
        "xtc_threshold",
        0.05,
        0.1,
        xtc_probability=1.0,
    ),
    _case(pytest.mark.flag_effect("--repeat-penalty"), "1.8", "repeat_penalty", 1.8, 1.0),
    _case(
        pytest.mark.flag_effect("--repeat-last-n"), "4", "repeat_last_n", 4, 64, repeat_penalty=2.0
    ),
    _case(pytest.mark.flag_effect("--presence-penalty"), "1.5", "presence_penalty", 1.5, 0.0),
    _case(pytest.mark.flag_effect("--frequency-penalty"), "1.5", "frequency_penalty", 1.5, 0.0),
    _case(pytest.mark.flag_effect("--dry-multiplier"), "2.0", "dry_multiplier", 2.0, 0.0),
    _case(
        pytest.mark.flag_effect("--dry-base"),
        "3.0",
        "dry_base",
        3.0,
        1.75,
        dry_multiplier=2.0,  # DRY sees the prompt's repeats too (as llama-server's)
        dry_allowed_length=1,
    ),
    _case(
        pytest.mark.flag_effect("--dry-allowed-length"),
        "1",
        "dry_allowed_length",
        1,
        2,
        dry_multiplier=2.0,
    ),
    _case(
        pytest.mark.flag_effect("--dry-penalty-last-n"),
        "8",
        "dry_penalty_last_n",
        8,
        64,
        dry_multiplier=2.0,
    ),
    _case(pytest.mark.flag_effect("--dynatemp-range"), "1.5", "dynatemp_range", 1.5, 0.0),
    _case(
        pytest.mark.flag_effect("--dynatemp-exp"),
        "4.0",
        "dynatemp_exponent",
        4.0,
        1.0,
        dynatemp_range=1.5,
    ),
    _case(pytest.mark.flag_effect("--mirostat"), "2", "mirostat", 2, 0),
    _case(pytest.mark.flag_effect("--mirostat-lr"), "0.9", "mirostat_eta", 0.9, 0.1, mirostat=2),
    _case(pytest.mark.flag_effect("--mirostat-ent"), "1.0", "mirostat_tau", 1.0, 5.0, mirostat=2),
    _case(
        pytest.mark.flag_effect("--samplers"),
        "top_k;temperature",
        "samplers",
        ["top_k", "temperature"],
        SAMPLERS,
    ),
    _case(pytest.mark.flag_effect("--seed"), "7", "seed", 7, 8),
]


@pytest.fixture(scope="module")
def server(smollm_path: str) -> Iterator[str]:
    args = [arg for p in CASES for arg in p.values[:2]]
    with running_server("-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1", *args) as url:
        yield url


def _text(url: str, fields: dict[str, Any]) -> str:
    body = {"prompt": PROMPT, "n_predict": 16, **fields}
    r = http.post(url + "/completion", json=body)
    assert r.status_code == 200, r.text
    return r.json()["content"]


@pytest.mark.parametrize(("flag", "arg", "field", "value", "other", "enable"), CASES)
def test_a_sampling_option_is_every_requests_default(
    server: str, flag: str, arg: str, field: str, value: Any, other: Any, enable: dict
) -> None:
    params = http.get(server + "/props").json()["default_generation_settings"]["params"]
    assert params[field] == pytest.approx(value)
    fields = {k: v for k, v in NEUTRAL.items() if k != field} | enable
    from_flag = _text(server, fields)
    assert from_flag == _text(server, {**fields, field: value})
    assert from_flag != _text(server, {**fields, field: other}), f"{flag} changes nothing here"
