"""The KServe examples against KServe v0.20.0's source: the pod webhook's scrape-annotation
rule leaves prometheus.io/port on pyllama's port, autoscaling targets the slots in both
modes, Knative's progress deadline outlasts the startup budget, answers carry the
InferenceService's name, and the documented copy puts the model where storageUri and
--model read it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pyllama.server.cli import parse_args

KSERVE_DOC = Path(__file__).resolve().parents[2] / "docs" / "scale-out" / "kserve.md"
SCRAPE = "serving.kserve.io/enable-prometheus-scraping"
AGGREGATE = "serving.kserve.io/enable-metric-aggregation"
MODE = "serving.kserve.io/deploymentMode"
KNATIVE_MODES = {"Knative", "Serverless"}  # v0.20: Serverless is the deprecated name
LARGE_MODEL_LOAD_S = 45 * 60  # a 70B Q4 GGUF (~40 GB) read at ~20 MB/s from network storage


def _inject_metrics_aggregator(annotations: dict, cluster: dict) -> dict:
    """pkg/webhook/admission/pod/metrics_aggregate_injector.go (v0.20.0),
    InjectMetricsAggregator, on a pod's annotations; ``cluster`` is the metricsAggregator
    entry of the inferenceservice-config ConfigMap."""
    out = dict(annotations)
    aggregate = out.setdefault(AGGREGATE, cluster["enableMetricAggregation"])
    if out.setdefault(SCRAPE, cluster["enablePrometheusScraping"]) == "true":
        out["prometheus.io/port"] = "9088" if aggregate == "true" else "9091"
        out["prometheus.io/path"] = "/metrics"
    return out


def _runtime(kserve) -> dict:
    (runtime,) = kserve["cluster-serving-runtime.yaml"]
    return runtime


def _isvcs(kserve) -> list[tuple[str, dict]]:
    return [
        (name, o) for name, objs in kserve.items() for o in objs if o["kind"] == "InferenceService"
    ]


def _argv(kserve, isvc: dict) -> list[str]:
    (container,) = _runtime(kserve)["spec"]["containers"]
    return [*container["args"], *isvc["spec"]["predictor"]["model"].get("args", [])]


@pytest.mark.parametrize("cluster_default", ["true", "false"])
@pytest.mark.parametrize("aggregation", ["true", "false"])
def test_pods_keep_pyllamas_metrics_port(kserve, cluster_default, aggregation):
    runtime = _runtime(kserve)
    for name, isvc in _isvcs(kserve):
        # the pod's annotations: runtime < InferenceService < predictor (buildObjectMeta)
        pod = {
            **runtime["spec"].get("annotations", {}),
            **isvc["metadata"].get("annotations", {}),
            **isvc["spec"]["predictor"].get("annotations", {}),
        }
        cluster = {
            "enableMetricAggregation": aggregation,
            "enablePrometheusScraping": cluster_default,
        }
        pod = _inject_metrics_aggregator(pod, cluster)
        port = parse_args(_argv(kserve, isvc), environ={}).port
        assert pod["prometheus.io/port"] == str(port), name
        assert pod["prometheus.io/path"] == "/metrics", name


def test_the_pod_monitor_scrapes_the_runtime_port(kserve):
    (monitor,) = kserve["pod-monitor.yaml"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (container,) = _runtime(kserve)["spec"]["containers"]
    assert endpoint["portNumber"] == parse_args(container["args"], environ={}).port
    assert endpoint["path"] == "/metrics"
    (expression,) = monitor["spec"]["selector"]["matchExpressions"]
    assert expression["key"] == "serving.kserve.io/inferenceservice"
    (relabel,) = endpoint["relabelings"]
    assert relabel["targetLabel"] == "isvc"


def test_standard_mode_scales_with_keda_on_requests_per_slot(kserve):
    standard = [
        (n, i)
        for n, i in _isvcs(kserve)
        if i["metadata"]["annotations"].get(MODE, "Standard") == "Standard"
    ]
    assert standard
    for name, isvc in standard:
        notes = isvc["metadata"]["annotations"]
        # no autoscalerClass = an HPA on 80% CPU, which one llama.cpp request saturates
        assert notes.get("serving.kserve.io/autoscalerClass") == "keda", name
        predictor = isvc["spec"]["predictor"]
        (metric,) = predictor["autoScaling"]["metrics"]
        external = metric["external"]
        query = external["metric"]["query"]
        for series in ("llamacpp:num_requests_waiting", "llamacpp:num_requests_running"):
            assert f'{series}{{isvc="{isvc["metadata"]["name"]}"}}' in query, name
        slots = parse_args(_argv(kserve, isvc), environ={}).n_parallel
        assert int(external["target"]["value"]) == slots, name


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", duration))


def test_knative_mode_scales_on_slots_and_waits_for_the_model(kserve):
    knative = [
        (n, i) for n, i in _isvcs(kserve) if i["metadata"]["annotations"].get(MODE) in KNATIVE_MODES
    ]
    assert knative, "an example for KServe's Knative (Serverless) mode"
    (container,) = _runtime(kserve)["spec"]["containers"]
    startup = container["startupProbe"]
    budget = startup["failureThreshold"] * startup["periodSeconds"]
    assert budget >= LARGE_MODEL_LOAD_S
    for name, isvc in knative:
        predictor = isvc["spec"]["predictor"]
        slots = parse_args(_argv(kserve, isvc), environ={}).n_parallel
        assert predictor["scaleMetric"] == "concurrency", name
        assert predictor["scaleTarget"] == slots, name  # Knative's default target: 100
        deadline = isvc["metadata"]["annotations"]["serving.knative.dev/progress-deadline"]
        assert _seconds(deadline) > budget, name  # Knative's default deadline: 600 s


def test_answers_carry_the_inference_service_name(kserve):
    (container,) = _runtime(kserve)["spec"]["containers"]
    assert "--alias={{.Name}}" in container["args"]
    assert str(parse_args(container["args"], environ={}).n_parallel) == "4"


def test_the_documented_copy_lands_where_the_model_is_read(kserve):
    block = re.search(
        r"<!-- model-copy: kserve -->\s*```bash\n(.*?)```", KSERVE_DOC.read_text(), re.S
    )
    assert block, "docs/scale-out/kserve.md shows how to copy the model"
    (cp,) = [
        shlex.split(line) for line in block.group(1).splitlines() if line.startswith("kubectl cp")
    ]
    _pod, target = cp[3].split(":", 1)
    mount = re.search(r'"mountPath":"([^"]+)"', block.group(1)).group(1)
    claim = re.search(r'"claimName":"([^"]+)"', block.group(1)).group(1)
    for name, isvc in _isvcs(kserve):
        uri = isvc["spec"]["predictor"]["model"]["storageUri"]
        assert uri.startswith("pvc://"), name
        uri_claim, folder = uri.removeprefix("pvc://").split("/", 1)
        model = parse_args(_argv(kserve, isvc), environ={}).model
        assert model.startswith("/mnt/models/"), name
        assert uri_claim == claim, name
        assert target == f"{mount}/{folder}/{model.removeprefix('/mnt/models/')}", name


def test_the_llm_inference_service_serves_on_kserves_port(kserve):
    (llm,) = kserve["llm-inference-service.yaml"]
    (main,) = llm["spec"]["template"]["containers"]
    settings = parse_args(main["args"], environ={})
    assert settings.port == 8000  # kserve-config-llm-template's port, probes and Service
    assert settings.alias == [llm["spec"]["model"]["name"]]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert main[probe]["httpGet"] == {"path": "/health", "port": 8000}, probe
