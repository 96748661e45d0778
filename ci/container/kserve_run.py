"""The `podman run` arguments that run a KServe ServingRuntime's container as KServe's pod
would: its command as the entrypoint, its args, env, port, CPU and memory limits and
security context, with a folder mounted at /mnt/models as the storage initializer fills it.

    python3 ci/container/kserve_run.py RUNTIME.yaml IMAGE MODELS_DIR HOST_PORT NAME

prints NUL-separated (for `mapfile -d ''`): the path the startup probe asks, "1" if the pod
must run as non-root (else "0"), then the arguments, image and args last. NAME stands for the InferenceService's name where the
runtime says {{.Name}}; any other template field is an error (this script would run a
command KServe never does).
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import yaml

MODELS = "/mnt/models"  # where KServe's storage initializer (or a PVC) puts the model


def cpu_count(quantity: str) -> float:
    """A Kubernetes CPU quantity ("2", "1500m") in cores."""
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def memory_bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 10**3, "M": 10**6}
    units |= {"G": 10**9, "T": 10**12}
    m = re.fullmatch(r"(\d+)([KMGT]i?)?", quantity)
    if m is None:
        raise SystemExit(f"kserve_run: memory quantity {quantity!r} not understood")
    return int(m[1]) * units.get(m[2] or "", 1)


def fill(text: str, name: str) -> str:
    text = text.replace("{{.Name}}", name)
    if "{{" in text:
        raise SystemExit(f"kserve_run: a template field this script cannot fill: {text}")
    return text


def env_value(entry: dict, limits: dict) -> str:
    if "value" in entry:
        return str(entry["value"])
    ref = entry.get("valueFrom", {}).get("resourceFieldRef")
    if ref is None or ref["resource"] != "limits.cpu":
        raise SystemExit(f"kserve_run: env {entry['name']}: only values and limits.cpu")
    # the downward API rounds up to a whole multiple of the divisor
    divisor = cpu_count(str(ref.get("divisor", "1")))
    return str(math.ceil(cpu_count(str(limits["cpu"])) / divisor))


def podman_args(
    runtime: dict, image: str, models: Path, host_port: int, name: str
) -> tuple[list[str], str, dict]:
    (container,) = runtime["spec"]["containers"]
    limits = container.get("resources", {}).get("limits", {})
    security = container.get("securityContext", {})
    (port,) = [p["containerPort"] for p in container["ports"]]
    args = ["--entrypoint", container["command"][0]]
    for entry in container.get("env", []):
        args += ["--env", f"{entry['name']}={fill(env_value(entry, limits), name)}"]
    if "cpu" in limits:
        args += ["--cpus", str(cpu_count(str(limits["cpu"])))]
    if "memory" in limits:
        args += ["--memory", str(memory_bytes(str(limits["memory"])))]
    if "ALL" in security.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", "all"]
    if security.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if "runAsUser" in security:
        args += ["--user", str(security["runAsUser"])]
    args += ["--publish", f"127.0.0.1:{host_port}:{port}"]
    args += ["--volume", f"{models}:{MODELS}:ro"]
    args += [image, *container["command"][1:], *(fill(a, name) for a in container["args"])]
    probe = container.get("startupProbe", container.get("readinessProbe", {}))
    return args, probe.get("httpGet", {}).get("path", "/health"), security


def main() -> None:
    manifest, image, models, host_port, name = sys.argv[1:]
    (runtime,) = [d for d in yaml.safe_load_all(Path(manifest).read_text()) if d]
    args, probe_path, security = podman_args(runtime, image, Path(models), int(host_port), name)
    non_root = "1" if security.get("runAsNonRoot") else "0"
    sys.stdout.write("\0".join([probe_path, non_root, *args]) + "\0")


if __name__ == "__main__":
    main()
