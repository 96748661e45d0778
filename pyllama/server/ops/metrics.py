"""/metrics in Prometheus text format, with llama-server's ``llamacpp:`` names.

Counters are totals since the server started, across sleeps (each sleep frees the engine
and a fresh one counts from zero, so the totals of earlier engines are carried). The two
throughput gauges are averaged over the window since the previous scrape, as llama-server's
buckets: a scrape resets them. While asleep the engine's last numbers are served.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MetricsBook"]

# engine counters that add up across engines; the other keys are gauges of the moment
_COUNTERS = (
    "n_prompt_tokens_total",
    "n_prompt_cached_total",
    "n_prompt_shared_total",
    "t_prompt_ms_total",
    "n_predicted_total",
    "t_predicted_ms_total",
    "n_decode_total",
    "n_busy_slots_total",
    "n_draft_tokens",
    "n_draft_accepted",
    "n_draft_steps",
)


def _rate(n: float, ms: float) -> float:
    return 1e3 * n / ms if ms > 0 else 0.0


class MetricsBook:
    def __init__(self) -> None:
        self._carry: dict[str, Any] = dict.fromkeys(_COUNTERS, 0)
        self._carry["n_tokens_max"] = 0
        self._frozen: dict[str, Any] | None = None  # an engine's last numbers, while asleep
        self._window = dict.fromkeys(("n_prompt", "t_prompt", "n_pred", "t_pred"), 0.0)

    def retire(self, engine_metrics: dict[str, Any]) -> None:
        """An engine is being freed (sleep): keep its totals and its last gauges."""
        for k in _COUNTERS:
            self._carry[k] += engine_metrics[k]
        self._carry["n_tokens_max"] = max(
            self._carry["n_tokens_max"], engine_metrics["n_tokens_max"]
        )
        self._frozen = dict(engine_metrics)

    def revive(self) -> None:
        self._frozen = None

    def _current(self, engine_metrics: dict[str, Any] | None) -> dict[str, Any]:
        if engine_metrics is None:  # asleep: the totals already include the frozen engine
            assert self._frozen is not None
            return {**self._frozen, **self._carry}
        m = dict(engine_metrics)
        for k in _COUNTERS:
            m[k] += self._carry[k]
        m["n_tokens_max"] = max(m["n_tokens_max"], self._carry["n_tokens_max"])
        return m

    def scrape(self, engine_metrics: dict[str, Any] | None) -> str:
        """The exposition text; ``None`` while asleep. Starts a new throughput window."""
        m = self._current(engine_metrics)
        w = self._window
        now = {
            "n_prompt": m["n_prompt_tokens_total"],
            "t_prompt": m["t_prompt_ms_total"],
            "n_pred": m["n_predicted_total"],
            "t_pred": m["t_predicted_ms_total"],
        }
        prompt_rate = _rate(now["n_prompt"] - w["n_prompt"], now["t_prompt"] - w["t_prompt"])
        gen_rate = _rate(now["n_pred"] - w["n_pred"], now["t_pred"] - w["t_pred"])
        self._window = now
        n_decode = max(1, m["n_decode_total"])
        rows = [
            (
                "counter",
                "prompt_tokens_total",
                "Number of prompt tokens processed.",
                m["n_prompt_tokens_total"],
            ),
            (
                "counter",
                "prompt_tokens_cached_total",
                "Number of prompt tokens taken from a slot's cache.",
                m["n_prompt_cached_total"],
            ),
            (
                "counter",
                "prompt_tokens_shared_total",
                "Of those, tokens copied from another slot's KV (a shared prompt prefix).",
                m["n_prompt_shared_total"],
            ),
            (
                "counter",
                "prompt_seconds_total",
                "Prompt process time",
                m["t_prompt_ms_total"] / 1e3,
            ),
            (
                "counter",
                "tokens_predicted_total",
                "Number of generation tokens processed.",
                m["n_predicted_total"],
            ),
            (
                "counter",
                "tokens_predicted_seconds_total",
                "Predict process time",
                m["t_predicted_ms_total"] / 1e3,
            ),
            (
                "counter",
                "n_decode_total",
                "Total number of llama_decode() calls",
                m["n_decode_total"],
            ),
            (
                "gauge",
                "n_busy_slots_per_decode",
                "Average number of busy slots per llama_decode() call",
                m["n_busy_slots_total"] / n_decode,
            ),
            (
                "gauge",
                "prompt_tokens_seconds",
                "Average prompt throughput in tokens/s.",
                prompt_rate,
            ),
            (
                "gauge",
                "predicted_tokens_seconds",
                "Average generation throughput in tokens/s.",
                gen_rate,
            ),
            ("gauge", "requests_processing", "Number of requests processing.", m["n_processing"]),
            ("gauge", "requests_deferred", "Number of requests deferred.", m["n_deferred"]),
            (
                "gauge",
                "kv_cache_usage_ratio",
                "KV-cache usage. 1 means 100 percent usage.",
                m["kv_usage"],
            ),
            ("counter", "n_tokens_max", "Largest observed n_tokens.", m["n_tokens_max"]),
            (
                "counter",
                "spec_decode_num_draft_tokens_total",
                "Speculative: Total draft tokens generated",
                m["n_draft_tokens"],
            ),
            (
                "counter",
                "spec_decode_num_accepted_tokens_total",
                "Speculative: Total draft tokens accepted by the target model",
                m["n_draft_accepted"],
            ),
            (
                "counter",
                "spec_decode_num_drafts_total",
                "Speculative: Total speculative decoding verification steps",
                m["n_draft_steps"],
            ),
        ]
        lines = []
        for kind, name, help_, value in rows:
            lines += [
                f"# HELP llamacpp:{name} {help_}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{name} {value}",
            ]
        return "\n".join(lines) + "\n"
