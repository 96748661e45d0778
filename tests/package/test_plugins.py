"""The plugin distributions (plugins/<name>/pyproject.toml) and the core's extras that pull
them: same version as the core, pinned exactly (ggml has no stable ABI), one ggml backend
each, built by the root CMakeLists.txt in plugin mode into a py3-none wheel."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pyllama._extras import DISTRIBUTION

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the test extras install tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
CORE = tomllib.loads((ROOT / "pyproject.toml").read_text())
PLUGINS = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))


def _plugin(name: str) -> dict:
    return tomllib.loads((ROOT / "plugins" / name / "pyproject.toml").read_text())


def test_there_are_the_gpu_plugins():
    assert PLUGINS == ["cuda13", "vulkan"]


@pytest.mark.parametrize("name", PLUGINS)
def test_a_plugin_is_the_cores_version_and_the_core_pins_it(name):
    project = _plugin(name)["project"]
    assert project["name"] == f"{DISTRIBUTION}-{name}"
    assert project["version"] == CORE["project"]["version"]
    pin = f"{project['name']}=={project['version']}"
    assert CORE["project"]["optional-dependencies"][name] == [pin]


@pytest.mark.parametrize("name", PLUGINS)
def test_a_plugin_builds_one_ggml_backend_for_every_python(name):
    build = _plugin(name)["tool"]["scikit-build"]
    backend = build["cmake"]["define"]["PYLLAMA_PLUGIN"]
    assert (ROOT / "cmake" / "plugin.cmake").is_file()
    assert build["cmake"]["source-dir"] == "../.."
    assert build["build"]["targets"] == [f"ggml-{backend}"]
    assert build["install"]["components"] == ["pyllama-plugin"]
    assert build["wheel"]["py-api"] == "py3"
    assert build["wheel"]["packages"] == []


def test_the_cuda_plugin_pulls_the_runtime_it_links():
    deps = _plugin("cuda13")["project"]["dependencies"]
    assert deps == ["nvidia-cuda-runtime>=13,<14", "nvidia-cublas>=13,<14"]
