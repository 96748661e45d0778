"""Backend plugins found at import (pyllama/plugins.py): a plugin that cannot load is
reported once, by name and reason, and skipped; the CPU goes on. Each case is a real
pyllama_plugins/<name>/ folder on PYTHONPATH, imported in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import pyllama

REPORT = (
    "import json, pyllama, pyllama.plugins as p; "
    "print(json.dumps({'plugins': [[x.name, list(x.backends), x.error] for x in p.plugins()], "
    "'cpu': any(d.type == 'cpu' for d in pyllama.devices())}))"
)


def _plugin(
    root: Path, name: str, version: str, module: bytes | None, needs: dict | None = None
) -> Path:
    folder = root / "pyllama_plugins" / name
    folder.mkdir(parents=True)
    meta = {"name": name, "distribution": f"pyllama-engine-{name}", "version": version}
    if needs is not None:
        meta["needs"] = needs
    (folder / "plugin.json").write_text(json.dumps(meta))
    if module is not None:
        (folder / f"libggml-{name}.so").write_bytes(module)
    return folder


def _import(root: Path, **env: str) -> tuple[dict, str]:
    paths = [str(root), os.environ.get("PYTHONPATH", "")]
    r = subprocess.run(
        [sys.executable, "-W", "always", "-c", REPORT],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **env},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1]), r.stderr


def _ours(report: dict, name: str) -> list:
    return [p for p in report["plugins"] if p[0] == name]


def test_a_module_that_will_not_load_is_reported_once_and_skipped(tmp_path):
    _plugin(tmp_path, "broken", pyllama.__version__, b"not an ELF file, just text")
    report, stderr = _import(tmp_path)
    [(_, backends, error)] = _ours(report, "broken")
    assert backends == []
    assert "libggml-broken.so" in error  # dlopen's reason, naming the file
    assert report["cpu"]
    lines = [line for line in stderr.splitlines() if "backend plugin broken" in line]
    assert len(lines) == 1
    assert "not loaded" in lines[0]


def test_a_plugin_of_another_version_is_refused_with_the_fix(tmp_path):
    _plugin(tmp_path, "stale", "0.0.1", b"never opened")
    report, stderr = _import(tmp_path)
    [(_, backends, error)] = _ours(report, "stale")
    assert backends == []
    assert error == (
        f"pyllama-engine-stale 0.0.1 does not match pyllama-engine {pyllama.__version__} "
        f"(ggml has no stable ABI): pip install pyllama-engine-stale=={pyllama.__version__}"
    )
    assert "backend plugin stale" in stderr


def test_a_library_the_module_opens_at_run_time_is_checked_first_and_named(tmp_path):
    # the CUDA plugin's "needs": libcuda.so.1, which the CUDA runtime opens itself, so the
    # module loads without a driver and ggml would only find no device
    absent = "libpyllama-absent-driver.so.1"
    _plugin(tmp_path, "gpu", pyllama.__version__, b"text", {absent: "a test driver"})
    report, stderr = _import(tmp_path)
    [(_, backends, error)] = _ours(report, "gpu")
    assert backends == []
    assert error.startswith(f"{absent} (a test driver) cannot be loaded: {absent}: ")
    assert report["cpu"]
    lines = [line for line in stderr.splitlines() if "backend plugin gpu" in line]
    assert len(lines) == 1
    assert absent in lines[0]


def test_a_library_that_is_present_lets_the_module_load_as_before(tmp_path):
    _plugin(tmp_path, "gpu", pyllama.__version__, b"text", {"libc.so.6": "the C library"})
    report, _ = _import(tmp_path)
    [(_, _, error)] = _ours(report, "gpu")
    assert "libggml-gpu.so" in error  # the module's own dlopen failure, as without needs


def test_an_unreadable_plugin_json_is_reported(tmp_path):
    folder = _plugin(tmp_path, "garbled", pyllama.__version__, None)
    (folder / "plugin.json").write_text("{not json")
    report, _ = _import(tmp_path)
    [(_, _, error)] = _ours(report, "garbled")
    assert error.startswith("unreadable plugin.json")


def test_a_folder_without_a_module_is_reported(tmp_path):
    _plugin(tmp_path, "empty", pyllama.__version__, None)
    report, _ = _import(tmp_path)
    [(_, _, error)] = _ours(report, "empty")
    assert error.startswith("no libggml-<backend>.so in ")


@pytest.mark.parametrize(("chosen", "seen"), [("none", []), ("other", []), ("broken", ["broken"])])
def test_pyllama_plugins_chooses_which_load(tmp_path, chosen, seen):
    _plugin(tmp_path, "broken", pyllama.__version__, b"text")
    report, stderr = _import(tmp_path, PYLLAMA_PLUGINS=chosen)
    assert [p[0] for p in _ours(report, "broken")] == seen
    assert ("backend plugin broken" in stderr) == bool(seen)


def test_a_plugin_for_a_backend_already_loaded_is_refused(tmp_path):
    cpu = next(b for b in pyllama.backends() if b.name == "CPU")
    _plugin(tmp_path, "cpu", pyllama.__version__, Path(cpu.path).read_bytes())
    report, _ = _import(tmp_path)
    [(_, backends, error)] = _ours(report, "cpu")
    assert backends == []
    assert error == f"a cpu backend is already loaded from {cpu.path}"
