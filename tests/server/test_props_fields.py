"""/props and /slots carry every field llama-server's do, with the values the same flags
give there, and the endpoint_* fields say what the endpoints really do (issue 38)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.peer import require_peer, running_peer
from helpers.servers import running_server

http = httpx.Client(timeout=60.0)

# /props fields whose values depend only on the flags and the model: pyllama must agree
SAME_VALUE = (
    "model_ftype",
    "endpoint_slots",
    "endpoint_props",
    "endpoint_metrics",
    "ui",
    "cors_proxy_enabled",
    "chat_template_caps",
    "total_slots",
    "modalities",
    "bos_token",
    "eos_token",
    "is_sleeping",
    "ui_settings",
)
SAME_PARAMS = (
    "chat_format",
    "reasoning_format",
    "reasoning_in_content",
    "generation_prompt",
    "backend_sampling",
    "lora",
)


def _keys(obj: Any, prefix: str = "") -> set[str]:
    """Every key path in ``obj`` (list items merged under ``[]``)."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out |= {prefix + k} | _keys(v, f"{prefix}{k}.")
    elif isinstance(obj, list):
        for item in obj:
            out |= _keys(item, prefix + "[].")
    return out


def _props_pair(args: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any], str]:
    require_peer()
    with running_peer(*args) as peer_url:
        peer = http.get(peer_url + "/props").json()
    with running_server(*args) as url:
        mine = http.get(url + "/props").json()
        return peer, mine, url


def _assert_matches_peer(peer: dict[str, Any], mine: dict[str, Any]) -> None:
    missing = _keys(peer) - _keys(mine)
    assert not missing, f"/props lacks llama-server's {sorted(missing)}"
    for key in SAME_VALUE:
        assert mine[key] == peer[key], key
    params, peer_params = (
        mine["default_generation_settings"]["params"],
        peer["default_generation_settings"]["params"],
    )
    for key in SAME_PARAMS:
        assert params[key] == peer_params[key], key


def test_props_fields_match_the_peer_by_default(smollm_path: str) -> None:
    args = ("-m", smollm_path, "-c", "1024", "-np", "2")
    peer, mine, _ = _props_pair(args)
    _assert_matches_peer(peer, mine)
    assert mine["model_ftype"] == "Q4_1"  # the demo model's type, as llama.cpp names it
    assert mine["endpoint_slots"] and not mine["endpoint_metrics"] and not mine["endpoint_props"]


@pytest.mark.flag_effect("--metrics", "--props", "--no-slots", "--no-webui", "--ui-mcp-proxy")
def test_endpoint_fields_follow_the_flags_and_the_endpoints(smollm_path: str) -> None:
    flags = ("--metrics", "--props", "--no-slots", "--no-webui", "--ui-mcp-proxy")
    args = ("-m", smollm_path, "-c", "1024", "-np", "2", *flags)
    require_peer()
    with running_peer(*args) as peer_url:
        peer = http.get(peer_url + "/props").json()
    with running_server(*args) as url:
        mine = http.get(url + "/props").json()
        _assert_matches_peer(peer, mine)
        assert mine["endpoint_metrics"] and mine["endpoint_props"] and mine["cors_proxy_enabled"]
        assert not mine["endpoint_slots"] and not mine["ui"]
        # each field says what its endpoint does on this very server
        assert http.get(url + "/metrics").status_code == 200
        assert http.get(url + "/slots").status_code == 501
        assert http.post(url + "/props", json={}).status_code == 200
        page = http.get(url + "/", headers={"Accept": "text/html"})
        assert "<html" not in page.text.lower()


def test_endpoint_fields_off(server: str) -> None:
    """The shared server runs with --metrics and the defaults otherwise."""
    props = http.get(server + "/props").json()
    assert props["endpoint_metrics"] is True
    assert props["endpoint_props"] is False
    assert http.post(server + "/props", json={}).status_code == 501
    assert props["endpoint_slots"] is True
    assert http.get(server + "/slots").status_code == 200
    assert props["cors_proxy_enabled"] is False
    assert props["ui"] is True


def test_model_ftype_of_an_f16_model(minilm_path: str) -> None:
    args = ("-m", minilm_path, "--embedding", "-c", "512", "-np", "1")
    peer, mine, _ = _props_pair(args)
    assert peer["model_ftype"] == "F16"
    assert mine["model_ftype"] == peer["model_ftype"]


def test_slots_fields_match_the_peer(smollm_path: str) -> None:
    args = ("-m", smollm_path, "-c", "1024", "-np", "2")
    require_peer()
    with running_peer(*args) as peer_url:
        peer = http.get(peer_url + "/slots").json()
    with running_server(*args) as url:
        mine = http.get(url + "/slots").json()
    assert len(mine) == len(peer) == 2
    for p, m in zip(peer, mine):
        assert set(p) <= set(m), sorted(set(p) - set(m))
        for key in ("id", "n_ctx", "speculative", "is_processing"):
            assert m[key] == p[key], key


# templates whose probes take different paths in llama.cpp's capability check: typed
# content, tools through tojson of a map(), system role refused, object arguments,
# reasoning effort, preserved reasoning
CAPS_TEMPLATES = (
    "LFM2.5-Instruct",
    "llama-cpp-deepseek-r1",
    "google-gemma-2-2b-it",
    "Qwen3-Coder",
    "openai-gpt-oss-120b",
    "Qwen3.5-4B",
    "Mistral-Small-3.2-24B-Instruct-2506",
)


@pytest.mark.parametrize("name", CAPS_TEMPLATES)
def test_chat_template_caps_match_the_peer(
    name: str, smollm_path: str, vendor_models: Path
) -> None:
    path = vendor_models / "templates" / f"{name}.jinja"
    args = ("-m", smollm_path, "-c", "512", "-np", "1", "--chat-template-file", str(path))
    with running_peer(*args) as url:
        peer = http.get(url + "/props").json()["chat_template_caps"]
    with running_server(*args) as url:
        ours = http.get(url + "/props").json()["chat_template_caps"]
    assert ours == peer
