"""llama-server's offload flags: --device, -ngl, --split-mode, --tensor-split, --main-gpu.
Checked as llama-server checks them; on a machine with no GPU backend they warn and the
model runs on the CPU, with the same answers."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import httpx
import pytest

import pyllama
from pyllama import _core

from helpers.servers import running_server

GPUS = [d.name for d in pyllama.devices() if d.type != "cpu"]


def _parse(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``parse_args(args)`` in the installed package, with no LLAMA_ARG_* but ``env``."""
    code = (
        "import sys; from pyllama.server.cli import parse_args; "
        "s = parse_args(sys.argv[1:]); "
        "print(s.devices, s.n_gpu_layers, s.split_mode, s.tensor_split, s.main_gpu)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # the installed package, not the checkout's source tree
        env={**clean, **env},
        timeout=120,
    )


def test_the_flags_reach_the_settings():
    r = _parse("-dev", "none", "-ngl", "0", "-sm", "none", "-ts", "3/1", "-mg", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['none'] 0 none [3.0, 1.0] 0"


def test_the_defaults_are_llama_servers():
    r = _parse()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[] auto layer [] 0"
    assert r.stderr == ""


def test_the_variables_set_them_too():
    r = _parse(LLAMA_ARG_SPLIT_MODE="row", LLAMA_ARG_DEVICE="none")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['none'] auto row [] 0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "NoSuchGPU0"], "invalid device: NoSuchGPU0"),
        (["--device", "CPU"], "invalid device: CPU"),  # the CPU is never an offload device
        (["--device", ","], "--device: no devices specified"),
        (["-sm", "columns"], "invalid choice: 'columns'"),
        (["-ts", "3,x"], "--tensor-split must be numbers separated by commas, got '3,x'"),
        (["-ngl", "many"], "--gpu-layers must be a number, 'auto' or 'all', got 'many'"),
    ],
)
def test_bad_values_are_refused_by_name(args, message):
    r = _parse(*args)
    assert r.returncode == 2
    assert message in r.stderr


def test_offload_flags_without_a_gpu_warn_once():
    r = _parse("-ngl", "99", "-sm", "row", "-mg", "1")
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    if GPUS:
        assert warnings == []
    else:
        assert warnings == [
            "pyllama-server: warning: no GPU device is loaded, so --gpu-layers, --split-mode, "
            "--main-gpu has no effect (pyllama-server --list-devices shows the devices)"
        ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"devices": ["CPU"]}, "invalid device: CPU"),
        ({"split_mode": "columns"}, "split_mode must be none, layer, row or tensor"),
        ({"tensor_split": [1.0] * 40}, "tensor_split has 40 proportions"),
    ],
)
def test_the_core_model_refuses_bad_placement(smollm_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        _core.Model(smollm_path, vocab_only=True, **kwargs)


def _greedy(url: str) -> str:
    body = {"prompt": "The capital of France is", "n_predict": 16, "temperature": 0}
    r = httpx.post(f"{url}/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["content"]


def test_a_server_told_not_to_offload_answers_as_one_that_may(smollm_path):
    with running_server("-m", smollm_path, "-t", "2", "-np", "1") as url:
        default = _greedy(url)
    placed = ("--device", "none", "-ngl", "0", "-sm", "none", "-mg", "0")
    with running_server("-m", smollm_path, "-t", "2", "-np", "1", *placed) as url:
        assert _greedy(url) == default


@pytest.mark.flag_effect("-ngl")
def test_props_counts_the_layers_that_went_to_a_gpu(smollm_path):
    """/props offloaded_layers: every layer with a GPU and -ngl 99, none with -ngl 0 or no
    GPU (llama.cpp logs "offloaded 31/31" whenever it could offload, GPU or not)."""
    for ngl, want in (("99", 31 if GPUS else 0), ("0", 0)):
        with running_server("-m", smollm_path, "-c", "512", "-ngl", ngl) as url:
            props = httpx.get(url + "/props", timeout=30).json()
            assert (props["offloaded_layers"], props["offloadable_layers"]) == (want, 31)
