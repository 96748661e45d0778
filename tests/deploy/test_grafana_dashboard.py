"""deploy/grafana/pyllama-dashboard.json asks only for series a running pyllama-server's
/metrics serves, with the labels it filters on: each PromQL expression of the dashboard
(panels and template variables) is read for its metric names, and each is looked up in
the scrape of a real server that has answered a request (so histograms have samples)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.servers import running_server

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "pyllama-dashboard.json"
# a metric name, then its label matchers if any
SELECTOR = re.compile(r"(llamacpp:[A-Za-z0-9_:]+)(\{[^}]*\})?")
PANELS = {
    "Requests waiting and running",
    "KV cache use",
    "Time to first token",
    "Inter-token latency",
    "Tokens per second",
    "Prefix cache hit rate",
    "Finished requests by reason",
}


def _expressions(dash: dict) -> list[str]:
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            exprs.append(query["query"])
    return exprs


@pytest.fixture(scope="module")
def served(smollm_path: str) -> Iterator[dict[str, set[str]]]:
    """sample name -> the label names its series carry, from a live server's /metrics."""
    args = ["-m", smollm_path, "-t", "2", "-c", "2048", "--metrics", "--alias", "demo"]
    with running_server(*args) as url:
        body = {"prompt": "The sea", "n_predict": 4}
        assert httpx.post(url + "/completion", json=body, timeout=120).status_code == 200
        text = httpx.get(url + "/metrics", timeout=30).text
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels.setdefault(s.name, set()).update(s.labels)
    yield labels


def test_the_dashboard_has_the_panels_people_look_at():
    dash = json.loads(DASHBOARD.read_text())
    assert {p["title"] for p in dash["panels"]} >= PANELS
    for p in dash["panels"]:
        assert p["targets"], p["title"]


def test_every_query_names_a_served_series(served):
    dash = json.loads(DASHBOARD.read_text())
    exprs = _expressions(dash)
    assert len(exprs) >= len(PANELS)
    for expr in exprs:
        found = SELECTOR.findall(expr)
        assert found, f"no llamacpp: series in {expr!r}"
        for name, matchers in found:
            assert name in served, f"{name} (in {expr!r}) is not served"
            for label in re.findall(r"([A-Za-z_]\w*)\s*=~?", matchers):
                assert label in served[name], f"{name} has no label {label} ({expr!r})"
        # label_values(series, label) and "by (label)" name labels the series must carry
        for label in re.findall(r"by \(([\w, ]+)\)", expr):
            for name, _ in found:
                for one in label.split(","):
                    one = one.strip()
                    if one != "le":
                        assert one in served[name], f"{name} has no label {one}"
        for name, label in re.findall(r"label_values\((llamacpp:\w+),\s*(\w+)\)", expr):
            assert label in served[name], f"{name} has no label {label}"
