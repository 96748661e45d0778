"""deploy/ray/rayservice.yaml runs the Ray Serve application it names: the import path
resolves to pyllama's public builder, its args pass pyllama's own argument checks, the
replicas fit the worker pods, and the model path is on the claim every worker mounts."""

from __future__ import annotations

import importlib
import math

import yaml

from pyllama.serve.rayserve import ServeArgs, build_app

MIN_RAY = (2, 60)  # the ray extra's floor


def _cpus(quantity: str) -> float:
    """A Kubernetes CPU quantity: "4" or "4000m"."""
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def _service(ray) -> dict:
    (service,) = ray["rayservice.yaml"]
    return service


def _app(ray) -> dict:
    (app,) = yaml.safe_load(_service(ray)["spec"]["serveConfigV2"])["applications"]
    return app


def test_the_import_path_is_pyllamas_builder(ray):
    module, attr = _app(ray)["import_path"].split(":")
    assert getattr(importlib.import_module(module), attr) is build_app


def test_the_args_pass_pyllamas_checks(ray):
    args = ServeArgs(**_app(ray)["args"])
    assert args.model == "/mnt/models/model.gguf"
    assert "--metrics" in args.argv()


def test_the_replicas_fit_the_workers(ray):
    spec = _service(ray)["spec"]["rayClusterConfig"]
    args = ServeArgs(**_app(ray)["args"])
    head = spec["headGroupSpec"]["rayStartParams"]
    assert head["num-cpus"] == "0", "no model replica on the head"
    room = 0
    for group in spec["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        cpus = _cpus(container["resources"]["limits"]["cpu"])
        room += group["minReplicas"] * math.floor(cpus / args.num_cpus)
    assert args.replicas <= room


def test_every_worker_reads_the_model_from_the_claim(ray, rendered):
    spec = _service(ray)["spec"]["rayClusterConfig"]
    (claim,) = [o for o in rendered["cpu"] if o["kind"] == "PersistentVolumeClaim"]
    model = ServeArgs(**_app(ray)["args"]).model
    for group in spec["workerGroupSpecs"]:
        pod = group["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        (container,) = pod["containers"]
        mounts = [m for m in container["volumeMounts"] if model.startswith(m["mountPath"] + "/")]
        (mount,) = mounts
        assert (
            volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
            == claim["metadata"]["name"]
        )
        drain = ServeArgs(**_app(ray)["args"]).graceful_shutdown_timeout_s
        assert drain is not None and pod["terminationGracePeriodSeconds"] > drain


def test_the_ray_version_is_the_extras(ray):
    version = _service(ray)["spec"]["rayClusterConfig"]["rayVersion"]
    assert tuple(int(p) for p in version.split(".")[:2]) >= MIN_RAY
