"""Every Kustomize overlay renders, and the rendered objects point at each other: selectors
match the pod labels, probes use /health with room for a model download, the endpoint
picker's configuration names pyllama's engine label and only plugins it defines."""

from __future__ import annotations

from pathlib import Path

import yaml

GATEWAY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "overlays" / "gateway"
BASE_KINDS = {"Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor", "ScaledObject"}
ENGINE_LABEL = "llm-d.ai/engine-type"
DOWNLOAD_S = 30 * 60  # the startup probe waits at least this long


def find(objects: list[dict], kind: str, name: str | None = None) -> dict:
    hits = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(hits) == 1, f"{len(hits)} objects of kind {kind} named {name}"
    return hits[0]


def test_the_overlays_are_the_documented_ones(overlay_names):
    assert overlay_names == [
        "api-key",
        "cpu",
        "gateway",
        "gateway-api-key",
        "gateway-istio",
        "gpu",
        "hf",
        "keda-auth",
        "rwx",
    ]


def test_overlay_renders_the_base(rendered, overlay):
    objects = rendered[overlay]
    assert {o["kind"] for o in objects} >= BASE_KINDS
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys)), "an object is defined twice"
    volumes = find(objects, "Deployment", "pyllama")["spec"]["template"]["spec"]["volumes"]
    claims = {
        v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v
    }
    pvcs = {o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim"}
    assert claims == pvcs, "every claim the pods mount is defined here, and no other"


def test_the_gateway_overlay_adds_the_pool_and_its_picker(rendered):
    kinds = {o["kind"] for o in rendered["gateway"]}
    assert {"InferencePool", "ConfigMap", "Role", "RoleBinding", "ServiceAccount"} <= kinds


def test_everything_selects_the_pods(rendered, overlay):
    objects = rendered[overlay]
    deployment = find(objects, "Deployment", "pyllama")
    labels = deployment["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict) -> bool:
        return selector.items() <= labels.items()

    assert selects(deployment["spec"]["selector"]["matchLabels"])
    service = find(objects, "Service", "pyllama")
    assert selects(service["spec"]["selector"])
    assert selects(find(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"])
    monitor = find(objects, "ServiceMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {
        p["name"] for p in service["spec"]["ports"]
    }
    assert find(objects, "ScaledObject")["spec"]["scaleTargetRef"]["name"] == "pyllama"
    assert "replicas" not in deployment["spec"], "the ScaledObject owns the replica count"
    if overlay.startswith("gateway"):
        pool = find(objects, "InferencePool")["spec"]
        assert selects(pool["selector"]["matchLabels"])
        assert [p["number"] for p in pool["targetPorts"]] == [8080]
        assert find(objects, "Service", pool["endpointPickerRef"]["name"])


def _probes(container: dict) -> None:
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", probe
        assert container[probe]["httpGet"]["port"] in ("http", 8080), probe
    startup = container["startupProbe"]
    assert startup["failureThreshold"] * startup["periodSeconds"] >= DOWNLOAD_S


def test_probes_wait_for_the_model(rendered, overlay):
    pod = find(rendered[overlay], "Deployment", "pyllama")["spec"]["template"]["spec"]
    _probes(pod["containers"][0])


def test_the_kserve_runtime_probes_and_scrape(kserve):
    runtime = find(kserve["cluster-serving-runtime.yaml"], "ClusterServingRuntime")
    _probes(runtime["spec"]["containers"][0])
    notes = runtime["spec"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true"
    assert notes["prometheus.io/port"] == notes["prometheus.kserve.io/port"] == "8080"
    assert notes["prometheus.io/path"] == notes["prometheus.kserve.io/path"] == "/metrics"
    formats = {f["name"] for f in runtime["spec"]["supportedModelFormats"]}
    for name, objects in kserve.items():
        for isvc in (o for o in objects if o["kind"] == "InferenceService"):
            assert isvc["spec"]["predictor"]["model"]["modelFormat"]["name"] in formats, name


def test_gpu_replicas_ask_for_a_gpu(rendered, kserve):
    pod = find(rendered["gpu"], "Deployment", "pyllama")["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["containers"][0]["image"].endswith(":cuda")
    model = find(kserve["inference-service-gpu.yaml"], "InferenceService")["spec"]["predictor"]
    assert model["model"]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def _picker_config(objects: list[dict]) -> dict:
    (text,) = find(objects, "ConfigMap")["data"].values()
    return yaml.safe_load(text)


def test_the_picker_reads_pyllama_metrics_by_its_engine_label(rendered):
    objects = rendered["gateway"]
    config = _picker_config(objects)
    names = {p.get("name") or p["type"] for p in config["plugins"]}
    refs = [p["pluginRef"] for prof in config["schedulingProfiles"] for p in prof["plugins"]]
    for source in config["dataLayer"]["sources"]:
        refs += [source["pluginRef"], *(e["pluginRef"] for e in source["extractors"])]
    assert set(refs) <= names, "a pluginRef names no plugin"
    (extractor,) = [p for p in config["plugins"] if p["type"] == "core-metrics-extractor"]
    params = extractor["parameters"]
    engines = {e["name"] for e in params["engineConfigs"]}
    labels = find(objects, "Deployment", "pyllama")["spec"]["template"]["metadata"]["labels"]
    assert params["engineLabelKey"] == ENGINE_LABEL
    assert labels[ENGINE_LABEL] == params["defaultEngine"] == "pyllama"
    assert engines == {"pyllama"}


def test_the_picker_mounts_its_configuration(rendered):
    objects = rendered["gateway"]
    config_map = find(objects, "ConfigMap")["metadata"]["name"]
    pod = find(objects, "Deployment", "pyllama-epp")["spec"]["template"]["spec"]
    (volume,) = pod["volumes"]
    assert volume["configMap"]["name"] == config_map
    (container,) = pod["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    (key,) = find(objects, "ConfigMap")["data"]
    args = container["args"]
    assert args[args.index("--config-file") + 1] == f"{mount['mountPath']}/{key}"
    assert args[args.index("--pool-name") + 1] == find(objects, "InferencePool")["metadata"]["name"]
    assert (GATEWAY / key).is_file()
