"""The command lines the manifests run are the ones docs/scale-out/ shows, and pyllama's
own flag parser takes each of them (as ``pyllama-server`` would at start)."""

from __future__ import annotations

import pytest

from pyllama.server.cli import parse_args

# where each command line runs -> the docs' <!-- command: NAME --> block it must equal
RUNS = {
    "overlays/api-key": "base",
    "overlays/cpu": "base",
    "overlays/gateway": "base",
    "overlays/gateway-api-key": "base",
    "overlays/gateway-istio": "base",
    "overlays/gpu": "gpu",
    "overlays/hf": "hf",
    "overlays/keda-auth": "base",
    "overlays/rwx": "base",
    "kserve/cluster-serving-runtime.yaml": "kserve",
    "kserve/inference-service-cpu.yaml": "kserve",
    "kserve/inference-service-knative.yaml": "kserve",
    "kserve/inference-service-gpu.yaml": "kserve-gpu",
    "kserve/llm-inference-service.yaml": "kserve-llm",
}
PORTS = {"kserve-llm": 8000}  # KServe's LLM template serves on 8000; the rest on 8080


def test_every_manifest_command_is_accounted_for(manifest_commands, doc_commands):
    assert set(manifest_commands) == set(RUNS)
    assert set(doc_commands) == set(RUNS.values())


@pytest.mark.parametrize("where", sorted(RUNS))
def test_the_manifest_runs_the_documented_command(manifest_commands, doc_commands, where):
    assert manifest_commands[where] == doc_commands[RUNS[where]]


@pytest.mark.parametrize("name", sorted(set(RUNS.values())))
def test_pyllama_parses_the_command(doc_commands, name):
    argv = doc_commands[name]
    assert argv[0] == "pyllama-server"
    settings = parse_args(argv[1:], environ={})
    port = PORTS.get(name, 8080)
    assert (settings.host, settings.port, settings.metrics) == ("0.0.0.0", port, True)
    if name == "hf":
        assert settings.hf_repo and settings.model is None
    else:
        assert settings.model == "/mnt/models/model.gguf"
    assert (str(settings.n_gpu_layers) == "99") == name.endswith("gpu")


def test_a_predictor_flag_overrides_the_runtime(doc_commands):
    """KServe appends an InferenceService's args to the runtime's: the later flag wins."""
    argv = [*doc_commands["base"][1:], "--model", "/mnt/models/other.gguf"]
    assert parse_args(argv, environ={}).model == "/mnt/models/other.gguf"
