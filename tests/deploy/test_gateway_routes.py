"""The gateway overlay's HTTPRoute against the routes pyllama-server serves: every route has
a rule, and the InferencePool gets only requests gateway-api-inference-extension v1.5.0's
endpoint picker parses (its openai-parser: the API is picked by the path's suffix, an
unknown path is taken for /completions and a body without ``model`` is refused). Also the
picker's TLS on Istio and its prefix-cache sizing."""

from __future__ import annotations

import yaml

from pyllama.server.app import create_app
from pyllama.server.settings import Settings

# pkg/epp/framework/plugins/requesthandling/parsers/openai/openai.go (v1.5.0),
# determineAPITypeFromPath: suffixes in this order; anything else falls back to completions
PICKER_SUFFIXES = (
    "/conversations",
    "/responses",
    "/chat/completions",
    "/completions",
    "/embeddings",
)
POOL = ("inference.networking.k8s.io", "InferencePool")


def _served_routes() -> list[tuple[str, str]]:
    """(method, path) of every route pyllama-server serves, path parameters filled in."""
    out = []
    for route in create_app(Settings()).routes:
        methods = getattr(route, "methods", None) or {"GET"}
        path = route.path.replace("{", "").replace("}", "")  # /slots/{id} -> /slots/id
        out += [(m, path or "/") for m in methods if m != "HEAD"]
    return sorted(set(out))


def _matches(match: dict, method: str, path: str) -> bool:
    if match.get("method", method) != method:
        return False
    kind, value = match["path"]["type"], match["path"]["value"]
    if kind == "Exact":
        return path == value
    assert kind == "PathPrefix"
    return value == "/" or path == value or path.startswith(value.rstrip("/") + "/")


def _rule_for(route: dict, method: str, path: str) -> dict | None:
    """The rule Gateway API's precedence picks: an exact path, then the longest prefix, then
    a method match."""
    best, best_key = None, None
    for rule in route["spec"]["rules"]:
        for match in rule.get("matches", [{"path": {"type": "PathPrefix", "value": "/"}}]):
            if _matches(match, method, path):
                exact = match["path"]["type"] == "Exact"
                key = (exact, len(match["path"]["value"]), "method" in match)
                if best_key is None or key > best_key:
                    best, best_key = rule, key
    return best


def _backend(rule: dict) -> tuple[str, str]:
    (ref,) = rule["backendRefs"]
    return ref.get("group", ""), ref.get("kind", "Service")


def _picker_parses(method: str, path: str) -> bool:
    return method == "POST" and any(path.endswith(s) for s in PICKER_SUFFIXES)


def _route(objects: list[dict]) -> dict:
    (route,) = [o for o in objects if o["kind"] == "HTTPRoute"]
    return route


def test_every_pyllama_route_has_a_backend(rendered):
    route = _route(rendered["gateway"])
    served = _served_routes()
    assert ("POST", "/v1/messages") in served and ("GET", "/metrics") in served
    missing = [r for r in served if _rule_for(route, *r) is None]
    assert not missing


def test_the_pool_gets_only_what_the_picker_parses(rendered):
    route = _route(rendered["gateway"])
    to_pool = [r for r in _served_routes() if _backend(_rule_for(route, *r)) == POOL]
    wrong = [r for r in to_pool if not _picker_parses(*r)]
    assert not wrong, f"the v1.5.0 picker answers 400 to these: {wrong}"
    assert ("POST", "/v1/chat/completions") in to_pool
    assert ("POST", "/v1/completions") in to_pool


def test_the_rest_goes_to_the_service(rendered):
    objects = rendered["gateway"]
    route = _route(objects)
    service = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "pyllama"]
    (port,) = service[0]["spec"]["ports"]
    for method, path in [
        ("POST", "/v1/messages"),
        ("POST", "/api/chat"),
        ("POST", "/completion"),
        ("POST", "/infill"),
        ("POST", "/tokenize"),
        ("POST", "/lora-adapters"),
        ("POST", "/v1/chat/completions/input_tokens"),
        ("GET", "/"),
        ("GET", "/slots"),
        ("GET", "/metrics"),
    ]:
        (ref,) = _rule_for(route, method, path)["backendRefs"]
        assert (ref.get("kind", "Service"), ref["name"], ref["port"]) == (
            "Service",
            "pyllama",
            port["port"],
        ), (method, path)


def test_pool_routes_wait_for_long_answers(rendered):
    for rule in _route(rendered["gateway"])["spec"]["rules"]:
        request = rule["timeouts"]["request"]
        assert request.endswith("s") and int(request[:-1]) >= 600


def test_istio_dials_the_picker_with_tls(rendered):
    objects = rendered["gateway-istio"]
    (rule,) = [o for o in objects if o["kind"] == "DestinationRule"]
    (pool,) = [o for o in objects if o["kind"] == "InferencePool"]
    assert rule["spec"]["host"] == pool["spec"]["endpointPickerRef"]["name"]
    assert rule["spec"]["trafficPolicy"]["tls"] == {"mode": "SIMPLE", "insecureSkipVerify": True}
    (epp,) = [
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "pyllama-epp"
    ]
    args = epp["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--secure-serving=false" not in args, "the picker serves TLS (v1.5.0 default)"


def _picker_plugins(objects: list[dict]) -> dict[str, dict]:
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    (text,) = config_map["data"].values()
    return {p["type"]: p.get("parameters", {}) for p in yaml.safe_load(text)["plugins"]}


def test_the_picker_reads_the_cache_size(rendered):
    plugins = _picker_plugins(rendered["gateway"])
    (engine,) = plugins["core-metrics-extractor"]["engineConfigs"]
    assert engine["cacheInfoSpec"] == "llamacpp:cache_config_info"


def test_the_prefix_index_fits_a_cpu_pod(rendered):
    """Until a pod reports its cache, the index assumes one of -c 8192: upstream's default
    (31250 blocks of 16 tokens, about 500K tokens) would steer to long-evicted prefixes."""
    params = _picker_plugins(rendered["gateway"])["prefix-cache-scorer"]
    assert params["autoTune"] is True
    tokens = params["lruCapacityPerServer"] * params["blockSizeTokens"]
    assert tokens == 8192
    assert params["maxPrefixBlocksToMatch"] * params["blockSizeTokens"] <= 8192
