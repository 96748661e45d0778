"""What the plain Kubernetes manifests need on a real cluster: kube-prometheus-stack's
`release` label on the monitors, the API key carried to Prometheus, a claim that binds on
ReadWriteOnce-only storage, and a KEDA trigger that neither reads "no data" as 0 nor lacks
the bearer token a guarded Prometheus wants."""

from __future__ import annotations

RELEASE = "kube-prometheus-stack"  # the chart's selector: release=<Helm release name>


def _one(objects: list[dict], kind: str, name: str | None = None) -> dict:
    hits = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(hits) == 1, (kind, name, len(hits))
    return hits[0]


def test_monitors_carry_the_release_label(all_objects):
    monitors = [(w, o) for w, o in all_objects if o["kind"] in ("ServiceMonitor", "PodMonitor")]
    assert {o["kind"] for _, o in monitors} == {"ServiceMonitor", "PodMonitor"}
    for where, monitor in monitors:
        assert monitor["metadata"]["labels"].get("release") == RELEASE, where


def test_the_api_key_reaches_the_pods_and_prometheus(rendered):
    objects = rendered["api-key"]
    pod = _one(objects, "Deployment", "pyllama")["spec"]["template"]["spec"]
    (env,) = [e for e in pod["containers"][0]["env"] if e["name"] == "LLAMA_API_KEY"]
    secret = env["valueFrom"]["secretKeyRef"]
    (endpoint,) = _one(objects, "ServiceMonitor")["spec"]["endpoints"]
    auth = endpoint["authorization"]
    assert auth["type"] == "Bearer"
    assert (auth["credentials"]["name"], auth["credentials"]["key"]) == (
        secret["name"],
        secret["key"],
    )


def test_the_gateway_runs_without_a_key(rendered):
    """The endpoint picker's metrics source cannot send one (v1.5.0: scheme, path and
    insecureSkipVerify only): with a key it would read no metrics."""
    for overlay in ("gateway", "gateway-istio"):
        container = _one(rendered[overlay], "Deployment", "pyllama")["spec"]["template"]["spec"][
            "containers"
        ][0]
        assert "LLAMA_API_KEY" not in {e["name"] for e in container["env"]}
        assert not {"--api-key", "--api-key-file"} & set(container["args"])


def test_a_gateway_with_a_key_leaves_the_metrics_open(rendered):
    """gateway-api-key: the key guards every route but /metrics, which the picker reads
    without one; pyllama's own parser takes the pod's environment that way."""
    from pyllama.server.cli import parse_args

    objects = rendered["gateway-api-key"]
    container = _one(objects, "Deployment", "pyllama")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["LLAMA_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "pyllama-api-key"
    assert _one(objects, "ServiceMonitor")["spec"]["endpoints"][0]["authorization"]
    values = {k: e["value"] for k, e in env.items() if "value" in e} | {"LLAMA_API_KEY": "k"}
    settings = parse_args(container["args"], environ=values)
    assert settings.metrics_public and settings.api_keys == ["k"]


def test_the_claim_binds_on_read_write_once_storage(rendered, overlay):
    claims = [o for o in rendered[overlay] if o["kind"] == "PersistentVolumeClaim"]
    expected = ["ReadWriteMany"] if overlay == "rwx" else ["ReadWriteOnce"]
    for claim in claims:
        assert claim["spec"]["accessModes"] == expected, overlay
    assert overlay == "hf" or claims


def test_keda_reports_missing_metrics(rendered, overlay):
    """KEDA's Prometheus scaler takes an empty answer for 0 unless told otherwise: a
    ServiceMonitor nobody selects would keep one replica, silently."""
    for trigger in _one(rendered[overlay], "ScaledObject")["spec"]["triggers"]:
        assert trigger["metadata"]["ignoreNullValues"] == "false", overlay


def test_keda_sends_a_bearer_token_from_a_trigger_authentication(rendered):
    objects = rendered["keda-auth"]
    (trigger,) = _one(objects, "ScaledObject")["spec"]["triggers"]
    assert trigger["metadata"]["authModes"] == "bearer"
    auth = _one(objects, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    assert [p["parameter"] for p in auth["spec"]["secretTargetRef"]] == ["bearerToken"]
