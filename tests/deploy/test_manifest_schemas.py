"""Every object a user applies validates offline: core kinds against Kubernetes' own schemas
(kubernetes-validate, strict: unknown fields are errors), custom resources against their
CRDs' openAPIV3Schema (tests/deploy/crds/, README.md there says where each comes from),
closed as the API server's strict field validation closes them; the endpoint picker's
configuration against the schema in tests/deploy/schemas/."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

HERE = Path(__file__).resolve().parent
GATEWAY = HERE.parents[1] / "deploy" / "kubernetes" / "overlays" / "gateway"
# the oldest Kubernetes the manifests are for (preStop's sleep action is on by default
# since 1.30)
KUBERNETES = "1.30"


def _edited(obj: dict, path: tuple, value: object) -> dict:
    """A copy of ``obj`` with the field at ``path`` set to ``value`` (None: removed)."""
    obj = copy.deepcopy(obj)
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if value is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


def _crd_files() -> dict[tuple[str, str], Path]:
    """(apiVersion, lower-case kind) -> schema file, named kind.group_version.json."""
    found = {}
    for path in sorted((HERE / "crds").glob("*.json")):
        kind, rest = path.stem.split(".", 1)
        group, version = rest.rsplit("_", 1)
        found[(f"{group}/{version}", kind)] = path
    return found


CRDS = _crd_files()


def _closed(schema: dict) -> dict:
    """The schema with every object that lists its properties closed to others, unless it
    keeps unknown fields: what kubectl's default (strict) field validation enforces."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {k: _closed(v) for k, v in out["properties"].items()}
        if "additionalProperties" not in out and not out.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = _closed(out[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [_closed(s) for s in out[key]]
    return out


@cache
def _validator(api_version: str, kind: str) -> jsonschema.Draft4Validator:
    schema = json.loads(CRDS[(api_version, kind.lower())].read_text())
    # the API server adds these to every CRD's root; some CRDs (Istio's) leave them out
    schema["properties"] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        **schema["properties"],
    }
    return jsonschema.Draft4Validator(_closed(schema))


def _errors(obj: dict) -> list[str]:
    validator = _validator(obj["apiVersion"], obj["kind"])
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def _is_custom(obj: dict) -> bool:
    return (obj["apiVersion"], obj["kind"].lower()) in CRDS


def test_every_kind_has_a_schema(all_objects):
    for where, obj in all_objects:
        if _is_custom(obj):
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            pytest.fail(f"{where}: no schema for {obj['apiVersion']} {obj['kind']}")
        except kubernetes_validate.ValidationError:
            pass  # reported by the next test


def test_core_objects_validate(all_objects):
    bad = []
    for where, obj in all_objects:
        if _is_custom(obj):
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(map(str, e.path))
            bad.append(f"{where} {obj['kind']}/{obj['metadata']['name']}: {path}: {e.message}")
    assert not bad, "\n".join(bad)


def test_custom_resources_validate(all_objects):
    custom = [(where, obj) for where, obj in all_objects if _is_custom(obj)]
    kinds = {obj["kind"] for _, obj in custom}
    assert kinds == {
        "ClusterServingRuntime",
        "DestinationRule",
        "HTTPRoute",
        "InferenceService",
        "InferencePool",
        "LLMInferenceService",
        "PodMonitor",
        "RayService",
        "ScaledObject",
        "ServiceMonitor",
        "TriggerAuthentication",
    }
    bad = [
        f"{where} {obj['kind']}/{obj['metadata']['name']}: {error}"
        for where, obj in custom
        for error in _errors(obj)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("ScaledObject", ["spec", "scaleTargetRef", "nmae"], "pyllama"),  # unknown field
        ("ServiceMonitor", ["spec", "endpoints", 0, "port"], 8080),  # a name, not a number
        ("InferencePool", ["spec", "targetPorts", 0, "number"], 70000),  # out of range
        ("InferencePool", ["spec", "selector"], None),  # required
        ("HTTPRoute", ["spec", "rules", 0, "matches", 0, "path", "type"], "Glob"),  # enum
        ("HTTPRoute", ["spec", "rules", 0, "matches", 0, "method"], "FETCH"),  # enum
        ("DestinationRule", ["spec", "trafficPolicy", "tls", "mode"], "TLS"),  # enum
    ],
)
def test_the_crd_schemas_catch_mistakes(rendered, kind, path, value):
    """The closed CRD schemas reject what the API server would: proof that they check."""
    (obj,) = [o for o in rendered["gateway-istio"] if o["kind"] == kind]
    assert _errors(_edited(obj, path, value))


@pytest.mark.parametrize(
    ("where", "kind", "path", "value"),
    [
        ("ray", "RayService", ["spec", "serveConfig"], "x"),  # unknown field (V2 is right)
        (
            "ray",
            "RayService",
            ["spec", "rayClusterConfig", "workerGroupSpecs", 0, "groupName"],
            None,
        ),
        ("kserve", "LLMInferenceService", ["spec", "model", "url"], "pvc://x"),  # uri
        ("kserve", "PodMonitor", ["spec", "podMetricsEndpoints", 0, "portNumber"], 0),  # min 1
    ],
)
def test_the_new_crd_schemas_catch_mistakes(all_objects, where, kind, path, value):
    (obj,) = [o for w, o in all_objects if w.startswith(where) and o["kind"] == kind]
    assert _errors(_edited(obj, path, value))


def _picker_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((HERE / "schemas" / "endpointpickerconfig.json").read_text())
    return jsonschema.Draft7Validator(schema)


def test_the_endpoint_picker_config_validates():
    config = yaml.safe_load((GATEWAY / "endpoint-picker-config.yaml").read_text())
    errors = [e.message for e in _picker_validator().iter_errors(config)]
    assert not errors


def test_the_endpoint_picker_schema_catches_a_misspelt_metric_field():
    """The picker reads plugin parameters leniently (a misspelt key is silently unused):
    the schema does not."""
    config = yaml.safe_load((GATEWAY / "endpoint-picker-config.yaml").read_text())
    (extractor,) = [p for p in config["plugins"] if p["type"] == "core-metrics-extractor"]
    extractor["parameters"]["engineConfigs"][0]["kvUsageSepc"] = "llamacpp:kv_cache_usage_perc"
    assert list(_picker_validator().iter_errors(config))


def test_the_endpoint_picker_schema_catches_a_misspelt_prefix_parameter():
    config = yaml.safe_load((GATEWAY / "endpoint-picker-config.yaml").read_text())
    (scorer,) = [p for p in config["plugins"] if p["type"] == "prefix-cache-scorer"]
    scorer["parameters"]["lruCapacityPerPod"] = scorer["parameters"].pop("lruCapacityPerServer")
    assert list(_picker_validator().iter_errors(config))


def test_the_core_schemas_catch_mistakes(rendered):
    """kubernetes-validate in strict mode rejects a misspelt field."""
    (deployment,) = [o for o in rendered["cpu"] if o["kind"] == "Deployment"]
    deployment = copy.deepcopy(deployment)
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    probe["httpGet"]["paht"] = probe["httpGet"].pop("path")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)
