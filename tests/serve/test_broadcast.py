"""pyllama.serve.rayserve.broadcast: which requests go to every replica, and one Prometheus
exposition from every replica's /metrics."""

from __future__ import annotations

import pytest

pytest.importorskip("ray", reason="the [ray] extra (Python >= 3.10)")  # the package needs it

from pyllama.serve.rayserve.broadcast import is_broadcast, merge_metrics

A = """# HELP llamacpp:requests_processing Requests being processed.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# TYPE llamacpp:ttft_seconds histogram
llamacpp:ttft_seconds_bucket{model_name="m",le="0.1"} 3
llamacpp:ttft_seconds_count{model_name="m"} 3
"""
B = A.replace("processing 1", "processing 2").replace("} 3", "} 5")


def test_which_requests_go_everywhere():
    assert is_broadcast("GET", "/metrics")
    assert is_broadcast("POST", "/lora-adapters")
    assert is_broadcast("POST", "/slots/0")
    assert not is_broadcast("GET", "/lora-adapters")  # replicas agree: any one answers
    assert not is_broadcast("GET", "/slots")
    assert not is_broadcast("POST", "/v1/chat/completions")
    assert not is_broadcast("POST", "/slots/0/extra")


def test_metrics_merge_labels_every_sample_and_keeps_families_whole():
    out = merge_metrics([("r1", A), ("r2", B)]).splitlines()
    assert out == [
        "# HELP llamacpp:requests_processing Requests being processed.",
        "# TYPE llamacpp:requests_processing gauge",
        'llamacpp:requests_processing{replica="r1"} 1',
        'llamacpp:requests_processing{replica="r2"} 2',
        "# TYPE llamacpp:ttft_seconds histogram",
        'llamacpp:ttft_seconds_bucket{replica="r1",model_name="m",le="0.1"} 3',
        'llamacpp:ttft_seconds_count{replica="r1",model_name="m"} 3',
        'llamacpp:ttft_seconds_bucket{replica="r2",model_name="m",le="0.1"} 5',
        'llamacpp:ttft_seconds_count{replica="r2",model_name="m"} 5',
    ]
