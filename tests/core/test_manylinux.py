"""The compiled files stay within manylinux_2_34, the tag the release wheels carry
(docs/distribution.md): no glibc symbol newer than 2.34 and no libstdc++ symbol newer than
GLIBCXX_3.4.29. The release script's auditwheel checks the wheel; this checks the quick
build CI makes, so that a change that would break the tag fails here first."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyllama import _core

if not sys.platform.startswith("linux"):
    pytest.skip("manylinux is Linux's", allow_module_level=True)

PACKAGE = Path(_core.__file__).parent
FILES = [Path(_core.__file__), *sorted((PACKAGE / "lib").glob("*.so"))]
LIMITS = {"GLIBC": (2, 34), "GLIBCXX": (3, 4, 29), "CXXABI": (1, 3, 13)}


def _versions(path: Path) -> dict[str, set[tuple[int, ...]]]:
    out = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True, check=True)
    found: dict[str, set[tuple[int, ...]]] = {}
    for name, version in re.findall(r"\b(GLIBCXX|GLIBC|CXXABI)_([0-9.]+)\b", out.stdout):
        found.setdefault(name, set()).add(tuple(int(p) for p in version.split(".")))
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_symbol_is_newer_than_manylinux_2_34(path: Path):
    too_new = {
        f"{name}_{'.'.join(map(str, v))}"
        for name, versions in _versions(path).items()
        for v in versions
        if v > LIMITS[name]
    }
    assert not too_new, f"{path.name} needs {sorted(too_new)}"
