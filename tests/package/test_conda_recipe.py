"""conda/recipe.yaml, rendered for each of its variants (CPU and each CUDA version) as
rattler-build renders it before solving: every requirement is a valid conda match spec, the
run requirements are pyproject's (the library and the server extra), the CPU build carries no
CUDA and every CUDA build the driver and toolkit pins of its version. The recipe cannot be
built here (no conda channel); this keeps it true to the project as it changes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from helpers.conda_recipe import PLATFORMS, render

if sys.version_info < (3, 10):  # py-rattler's wheels need 3.10 (pyproject marks it so)
    pytest.skip("py-rattler needs Python 3.10", allow_module_level=True)
from rattler import MatchSpec

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "conda" / "recipe.yaml"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
VARIANTS = yaml.safe_load((ROOT / "conda" / "variants.yaml").read_text())
CUDA = VARIANTS["cuda_compiler_version"]
PYTHONS = VARIANTS["python"]


def _variant(cuda: str, platform: str = "linux-64") -> dict:
    return render(RECIPE, {"cuda_compiler_version": cuda, "python": PYTHONS[-1]}, platform)


def _specs(recipe: dict, section: str) -> dict[str, str]:
    """name -> version constraint ('' for none) of one requirements section."""
    out = {}
    for text in recipe["requirements"][section]:
        spec = MatchSpec(text)  # raises on anything conda could not read
        out[spec.name.normalized] = str(spec.version) if spec.version else ""
    return out


def _pep508_as_conda(requirement: str) -> tuple[str, str]:
    """'uvloop>=0.19; sys_platform != "win32"' -> ('uvloop', '>=0.19')."""
    m = re.fullmatch(r"([A-Za-z0-9._-]+)\s*([<>=!~][^;]*)?(;.*)?", requirement.strip())
    assert m, requirement
    return m[1].lower().replace("_", "-"), (m[2] or "").replace(" ", "")


@pytest.mark.parametrize("cuda", CUDA)
@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_every_variant_renders_to_valid_match_specs(cuda: str, platform: str):
    recipe = _variant(cuda, platform)
    assert recipe["package"] == {"name": PROJECT["name"], "version": PROJECT["version"]}
    for section in ("build", "host", "run"):
        assert _specs(recipe, section), section


def test_the_run_requirements_are_pyprojects():
    run = _specs(_variant("None"), "run")
    wanted = dict(
        _pep508_as_conda(r)
        for r in [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["server"]]
    )
    assert {name: v for name, v in run.items() if name != "python"} == wanted


def test_the_build_requirements_are_pyprojects():
    host = _specs(_variant("None"), "host")
    for requirement in PYPROJECT["build-system"]["requires"]:
        name, version = _pep508_as_conda(requirement)
        if name != "pip":  # pip fills an empty vendor/ in a git checkout; the sdist has it
            assert host[name] == version, name


def test_the_cpu_build_has_no_cuda_and_every_x86_variant():
    recipe = _variant("None")
    everything = " ".join(t for s in ("build", "host", "run") for t in recipe["requirements"][s])
    assert "cuda" not in everything
    assert recipe["build"]["string"].startswith("cpu_")
    assert recipe["build"]["number"] == 0
    args = recipe["build"]["script"]["env"]["PYLLAMA_CMAKE_ARGS"].split()
    assert args == ["-DPYLLAMA_CPU_ALL_VARIANTS=ON"]
    arm = _variant("None", "linux-aarch64")["build"]["script"]["env"]["PYLLAMA_CMAKE_ARGS"]
    assert arm.split() == []  # ggml's x86 variants only; arm builds one module


@pytest.mark.parametrize("cuda", [c for c in CUDA if c != "None"])
def test_each_cuda_build_pins_its_toolkit_and_needs_a_driver(cuda: str):
    recipe = _variant(cuda)
    tag = "cuda" + cuda.replace(".", "")
    assert recipe["build"]["string"].startswith(tag + "_")
    assert recipe["build"]["number"] == 200  # preferred over the CPU build where __cuda is
    assert "cuda_compiler_linux-64" in recipe["requirements"]["build"]
    host, run = _specs(recipe, "host"), _specs(recipe, "run")
    assert host["cuda-version"] == run["cuda-version"] == f"{cuda}.*"
    assert "__cuda" in run and "libcublas-dev" in host
    assert "-DGGML_CUDA=ON" in recipe["build"]["script"]["env"]["PYLLAMA_CMAKE_ARGS"]
    assert recipe["build"]["dynamic_linking"]["missing_dso_allowlist"] == ["*/libcuda.so.1"]


def test_it_builds_from_the_sdist_the_release_script_writes():
    path = _variant("None")["source"]["path"]
    assert path == f"../dist/{PROJECT['name'].replace('-', '_')}-{PROJECT['version']}.tar.gz"
    script = (ROOT / "ci" / "build_wheel.sh").read_text()
    assert '"${1:-$ROOT/dist}"' in script  # where the release script writes it


def test_the_license_files_exist():
    for name in _variant("None")["about"]["license_file"]:
        assert (ROOT / name).is_file(), name
