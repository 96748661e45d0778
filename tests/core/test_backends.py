"""ggml's backends are modules in pyllama/lib, loaded from there at import (not from
python's folder), the CPU variant chosen for this machine and named in the API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pyllama
from pyllama import _core

LIB = Path(_core.__file__).parent / "lib"


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # the installed package, not the source tree
        env={**os.environ, **env},
        timeout=120,
    )


def test_the_libraries_sit_in_the_package_without_soname_links():
    names = sorted(p.name for p in LIB.iterdir())
    for lib in ("libggml-base.so", "libggml.so", "libllama.so", "libllama-common.so"):
        assert lib in names, names
    assert any(n.startswith("libggml-cpu") for n in names), names
    assert not any(p.is_symlink() for p in LIB.iterdir())
    assert not any(".so." in n for n in names), names  # no versioned file names


def _runpath(path: str) -> list[str]:
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    found = re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library \w+: \[(.*)\]", out.stdout)
    assert len(found) == 1, out.stdout
    return found[0].split(":")


def test_rpaths_are_relative_to_the_files():
    # a source build: exactly these; a repaired wheel adds auditwheel's folder of grafted
    # libraries (../pyllama_engine.libs), relative too: nothing may name a build machine's path
    core, llama = _runpath(_core.__file__), _runpath(str(LIB / "libllama.so"))
    assert core[0] == "$ORIGIN/lib" and llama[0] == "$ORIGIN"
    for entry in core[1:] + llama[1:]:
        assert entry.startswith("$ORIGIN/") and entry.endswith(".libs"), entry


def test_the_cpu_backend_is_loaded_from_the_package():
    cpu = [b for b in pyllama.backends() if b.name == "CPU"]
    assert len(cpu) == 1 and Path(cpu[0].path).parent == LIB and cpu[0].score > 0
    devices = pyllama.devices()
    assert [d.type for d in devices].count("cpu") == 1
    # the CPU device's memory is the machine's RAM, as llama.cpp's CPU backend reports it
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    (host,) = [d for d in devices if d.type == "cpu"]
    assert host.memory_total == ram and 0 < host.memory_free <= host.memory_total


def test_a_cpu_variant_that_is_not_built_is_refused_by_name():
    r = _python("import pyllama", PYLLAMA_CPU_VARIANT="nosuchvariant")
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]  # the error itself, not a generic one
    assert last.startswith(
        "ImportError: PYLLAMA_CPU_VARIANT=nosuchvariant: no such CPU variant (built: "
    )


def test_the_built_variant_can_be_named():
    cpu = next(b for b in pyllama.backends() if b.name == "CPU")
    if cpu.variant:  # a release build: its variants are named; a source build's is not
        r = _python(
            "from pyllama.hardware import cpu_variant; print(cpu_variant())",
            PYLLAMA_CPU_VARIANT=cpu.variant,
        )
        assert r.returncode == 0 and r.stdout.strip() == cpu.variant, r.stderr
    r = _python("import pyllama; print(pyllama.system_info())")
    assert r.returncode == 0 and "CPU" in r.stdout


def test_list_devices_prints_what_llama_server_prints():
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "--list-devices"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Available devices:"
    gpus = [d for d in pyllama.devices() if d.type != "cpu"]
    assert len(lines) == 1 + max(1, len(gpus))
    if not gpus:
        assert lines[1] == "  (none)"
