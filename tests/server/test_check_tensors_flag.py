"""--check-tensors validates the tensor data at load: a copy of SmolLM2 with a NaN in
output_norm.weight serves without it, and with it the load fails naming the tensor, as
llama-server's does."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import numpy as np
import pytest
from gguf import GGUFReader

from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, free_port, running_server

INVALID = "tensor 'output_norm.weight' has invalid data"


@pytest.fixture(scope="module")
def nan_model(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("nan") / "nan.gguf"
    shutil.copy(smollm_path, path)
    tensor = next(t for t in GGUFReader(path).tensors if t.name == "output_norm.weight")
    assert tensor.tensor_type == 0  # F32
    with path.open("r+b") as f:
        f.seek(tensor.data_offset)
        f.write(np.array([np.nan], dtype=np.float32).tobytes())
    return str(path)


def failed_load(cmd: list[str]) -> str:
    """The output of a server that must exit during its load."""
    r = subprocess.run(
        [*cmd, "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode != 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout + r.stderr


@pytest.mark.flag_effect("--check-tensors")
def test_check_tensors_refuses_a_nan(nan_model: str) -> None:
    common = ["-m", nan_model, "-c", "512", "-t", "2", "--no-warmup"]
    with running_server(*common):
        pass  # without the check the file loads and serves
    ours = failed_load([*PYLLAMA_SERVER, *common, "--check-tensors"])
    theirs = failed_load([str(require_peer()), *common, "--check-tensors", "--no-webui"])
    assert INVALID in theirs, theirs[-2000:]
    assert INVALID in ours, ours[-2000:]
