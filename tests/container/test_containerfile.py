"""What the Containerfiles and ci/container/ promise, read without building an image.

ci/container/check.sh builds and serves the CPU image with podman (minutes, root, a
debootstrap base); these checks are the static part: the base is a build arg whose default a
registry serves, the entrypoint is a console script the wheel installs on the image's PATH,
the image runs as a numeric non-root user, its command is one pyllama parses, and the KServe
runtime's container maps onto `podman run` as its pod would run it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from pyllama.server.cli import parse_args

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILES = {
    "cpu": ROOT / "deploy" / "container" / "Containerfile.cpu",
    "cuda": ROOT / "deploy" / "container" / "Containerfile.cuda",
}
RUNTIME = ROOT / "deploy" / "kserve" / "cluster-serving-runtime.yaml"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments) in order, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def args_before_from(steps: list[tuple[str, str]]) -> dict[str, str]:
    """The ARGs declared before FROM with their defaults, ${NAME} expanded as a build does."""
    found: dict[str, str] = {}
    for word, rest in steps:
        if word == "FROM":
            break
        if word == "ARG":
            name, _, default = rest.partition("=")
            found[name] = re.sub(r"\$\{(\w+)\}", lambda m: found[m[1]], default)
    return found


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "ci" / "container" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runtime_container() -> dict:
    (runtime,) = [d for d in yaml.safe_load_all(RUNTIME.read_text()) if d]
    (container,) = runtime["spec"]["containers"]
    return container


@pytest.mark.parametrize("kind", sorted(CONTAINERFILES))
def test_the_base_is_a_build_arg_with_a_registry_default(kind):
    """check.sh passes BASE=<the debootstrap base>; without it the image is built FROM the
    python image of the wheel's Python, as before."""
    steps = instructions(CONTAINERFILES[kind])
    assert steps[[w for w, _ in steps].index("FROM")] == ("FROM", "${BASE}")
    assert args_before_from(steps)["BASE"] == "python:3.11-slim-bookworm"


@pytest.mark.parametrize("kind", sorted(CONTAINERFILES))
def test_the_entrypoint_is_on_the_venv_path(kind):
    steps = instructions(CONTAINERFILES[kind])
    (run,) = [rest for word, rest in steps if word == "RUN"]
    venv = re.search(r"python3 -m venv (\S+)", run)
    assert venv, "pip must install into a venv: Debian's python3 is externally managed"
    assert f"{venv[1]}/bin/pip install" in run
    (path,) = [rest for word, rest in steps if word == "ENV" and rest.startswith("PATH=")]
    assert path.startswith(f"PATH={venv[1]}/bin:")
    (entrypoint,) = [json.loads(rest) for word, rest in steps if word == "ENTRYPOINT"]
    assert entrypoint == ["pyllama-server"]


@pytest.mark.parametrize("kind", sorted(CONTAINERFILES))
def test_the_image_runs_as_a_numeric_non_root_user(kind):
    """Kubernetes' runAsNonRoot (the KServe runtime sets it) can only check a numeric uid."""
    steps = instructions(CONTAINERFILES[kind])
    (user,) = [rest for word, rest in steps if word == "USER"]
    assert user.isdigit() and int(user) > 0
    (run,) = [rest for word, rest in steps if word == "RUN"]
    assert f"useradd --create-home --uid {user} " in run


@pytest.mark.parametrize("kind", sorted(CONTAINERFILES))
def test_pyllama_parses_the_image_command(kind):
    steps = instructions(CONTAINERFILES[kind])
    (cmd,) = [json.loads(rest) for word, rest in steps if word == "CMD"]
    (exposed,) = [int(rest) for word, rest in steps if word == "EXPOSE"]
    settings = parse_args(cmd, environ={})
    assert (settings.host, settings.port, settings.metrics) == ("0.0.0.0", exposed, True)
    assert (str(settings.n_gpu_layers) == "99") == (kind == "cuda")


@pytest.mark.parametrize("kind", sorted(CONTAINERFILES))
def test_pip_can_be_kept_off_the_index(kind):
    """check.sh builds with --network none and PIP_NO_INDEX=1: pip sees it only if the
    Containerfile declares it (an undeclared build arg is not in RUN's environment)."""
    declared = [rest for word, rest in instructions(CONTAINERFILES[kind]) if word == "ARG"]
    assert {"PIP_NO_INDEX", "PIP_INDEX_URL"} <= set(declared)


def test_the_kserve_command_is_a_console_script_of_the_wheel():
    container = runtime_container()
    scripts = importlib.metadata.distribution("pyllama-engine").entry_points
    assert container["command"][0] in {e.name for e in scripts if e.group == "console_scripts"}


def test_the_kserve_runtime_names_the_image_check_sh_builds():
    check = (ROOT / "ci" / "container" / "check.sh").read_text()
    image = re.search(r"IMAGE=\$\{IMAGE:-localhost/([^}]+)\}", check)
    assert image and runtime_container()["image"] == image[1]


def test_podman_runs_the_kserve_container_as_its_pod():
    kserve_run = load_script("kserve_run")
    container = runtime_container()
    (runtime,) = [d for d in yaml.safe_load_all(RUNTIME.read_text()) if d]
    args, probe, _ = kserve_run.podman_args(
        runtime, "localhost/pyllama:cpu", Path("/m"), 18081, "isvc"
    )
    image_at = args.index("localhost/pyllama:cpu")
    options, argv = args[:image_at], args[image_at + 1 :]
    assert options[options.index("--entrypoint") + 1] == container["command"][0]
    assert "--volume" in options and "/m:/mnt/models:ro" in options
    # the model the command loads is where the storage initializer puts it
    settings = parse_args(argv, environ={})
    assert settings.model.startswith("/mnt/models/")
    assert "{{" not in shlex.join(argv)
    env = dict(options[i + 1].split("=", 1) for i, o in enumerate(options) if o == "--env")
    limit = str(container["resources"]["limits"]["cpu"])
    assert env["LLAMA_ARG_THREADS"] == str(int(kserve_run.cpu_count(limit) + 0.999))
    assert probe == container["startupProbe"]["httpGet"]["path"]


def test_the_downward_api_rounds_cpu_up():
    kserve_run = load_script("kserve_run")
    ref = {"name": "N", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}
    assert kserve_run.env_value(ref, {"cpu": "1500m"}) == "2"
    assert kserve_run.env_value(ref, {"cpu": "4"}) == "4"
    assert kserve_run.memory_bytes("4Gi") == 4 * 2**30


def test_the_ray_image_is_the_cpu_image_with_the_ray_extra():
    """deploy/ray/rayservice.yaml runs pyllama:ray: the CPU Containerfile with
    EXTRAS=server,ray, extras that pyllama-engine declares."""
    text = CONTAINERFILES["cpu"].read_text()
    assert "ARG EXTRAS=server" in text.splitlines()
    assert '"pyllama-engine[${EXTRAS}]==${PYLLAMA_VERSION}"' in text
    extras = importlib.metadata.distribution("pyllama-engine").metadata.get_all("Provides-Extra")
    assert {"server", "ray"} <= set(extras or [])
    rayservice = (CONTAINERFILES["cpu"].parents[1] / "ray" / "rayservice.yaml").read_text()
    assert "image: pyllama:ray" in rayservice and "EXTRAS=server,ray" in rayservice
