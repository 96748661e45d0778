"""ci/test_wheel.sh runs this suite against a distribution it installed into a fresh venv
(the release workflow's test of each wheel and of the sdist): ``import pyllama`` must then
be that installed copy, not this checkout's source tree. The script names the distribution
in PYLLAMA_TESTED_DIST; CI and a development install test the checkout's own build, which
has no such copy to check."""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path

import pytest

import pyllama
from pyllama import _core
from pyllama._extras import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
TESTED = os.environ.get("PYLLAMA_TESTED_DIST", "")
pytestmark = pytest.mark.skipif(
    not TESTED,
    reason="PYLLAMA_TESTED_DIST is not set: ci/test_wheel.sh sets it to the distribution "
    "it installed",
)


def test_pyllama_is_the_installed_distribution():
    installed = Path(
        importlib.metadata.distribution(DISTRIBUTION).locate_file("pyllama/__init__.py")
    ).resolve()
    assert Path(pyllama.__file__).resolve() == installed
    assert Path(_core.__file__).resolve().parent == installed.parent
    assert ROOT not in installed.parents


def test_it_is_the_version_of_the_file_installed():
    name = Path(TESTED).name
    m = re.match(r"pyllama_engine-(.+?)(?:-|\.tar\.gz$)", name)
    assert m, name
    assert importlib.metadata.version(DISTRIBUTION) == m[1] == pyllama.__version__
