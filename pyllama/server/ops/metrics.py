"""/metrics in Prometheus text format, with llama-server's ``llamacpp:`` names.

Counters are totals since the server started, across sleeps (each sleep frees the engine
and a fresh one counts from zero, so the totals of earlier engines are carried).
llama-server's two throughput gauges average the time since the previous scrape, which
starts a new window (an endpoint picker scraping every 50 ms leaves Prometheus noise);
``*_per_second_10s`` average the last 10 s (``window``), whoever scrapes. While asleep the
engine's last numbers are served.

Labels: the series llama-server serves keep its exact, unlabelled lines (its test suite
and the scrapers made for it read them so); every series pyllama adds carries
``model_name`` (the first ``--alias``, else the model's source), as vLLM labels all of its
own, so that dashboards made for vLLM can filter on it.

Beside llama-server's, the signals gateways and autoscalers read (the Gateway API Inference
Extension's endpoint picker / llm-d, KEDA, Ray), each with the meaning of the vLLM metric
its HELP names: requests waiting (submitted, not in a slot yet) and running (in a slot:
one per slot, so a task of ``n`` completions counts ``n``); KV-cache use of the requests in
slots (``kv_cache_usage_perc``: 0 when idle, where llama-server's ``kv_cache_usage_ratio``
also counts the prompts idle slots keep for reuse, which the engine drops when it needs
the room); LoRA adapters used by running and waiting requests (``lora_requests_info``); the
prefix cache in tokens (queries: every prompt token of every request, evaluated or taken
from a cache; hits: those taken from a slot's own cache, the host prompt cache or another
slot's shared prefix); the size of the KV cache in blocks (``cache_config_info``, which the
picker's prefix index sizes itself by); generated tokens (``generation_tokens_total``);
and the per-request histograms and success counts of ``latency``.

With one KV pool for all slots (``--kv-unified``, the default without ``-np``), a prefix
that slots share is held once but counted for each slot that holds it, so both KV ratios
are upper bounds there (capped at 1); with a stream per slot they are exact.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyllama.server.ops.latency import label_value
from pyllama.server.ops.occupancy import Load, cache_lines, load_of, lora_lines
from pyllama.server.ops.window import ThroughputWindow, Totals, rate

if TYPE_CHECKING:
    from pyllama.server.state import ServerState

__all__ = ["LLAMA_SERVER_NAMES", "MetricsBook", "render"]

# the series llama-server itself serves (tools/server/server-task.cpp): unlabelled here too
LLAMA_SERVER_NAMES = frozenset(
    {
        "prompt_tokens_total",
        "prompt_tokens_cached_total",
        "prompt_seconds_total",
        "tokens_predicted_total",
        "tokens_predicted_seconds_total",
        "n_decode_total",
        "n_tokens_max",
        "spec_decode_num_draft_tokens_total",
        "spec_decode_num_accepted_tokens_total",
        "spec_decode_num_drafts_total",
        "prompt_tokens_seconds",
        "predicted_tokens_seconds",
        "requests_processing",
        "requests_deferred",
        "n_busy_slots_per_decode",
    }
)


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
    "n_sampled_backend",
    "n_sampled_split",
    "n_sampled_host",
    "n_draft_sampled_backend",
)


def render(state: ServerState) -> str:
    """The whole /metrics text (the route checks ``--metrics``; 503 while loading)."""
    engine = None if state.sleeping else state.require()[1]
    adapters = [Path(path).stem for path, _ in state.settings.lora]
    if engine is None:
        m, load = None, Load()
    else:
        m = engine.engine.metrics()
        load = load_of(engine, adapters)
    book = state.metrics_book
    book.keep_sampling(state)
    model = 'model_name="' + label_value(state.model_name) + '"'
    lines = book.scrape(m, load, model)
    lines += lora_lines(adapters, load, book.lora_since(load), model)
    lines += cache_lines(state.n_ctx, model)
    lines += state.request_timings.lines(state.model_name)
    return "\n".join(lines) + "\n"


class MetricsBook:
    def __init__(self) -> None:
        self._carry: dict[str, Any] = dict.fromkeys(_COUNTERS, 0)
        self._carry["n_tokens_max"] = 0
        self._frozen: dict[str, Any] | None = None  # an engine's last numbers, while asleep
        self.window = ThroughputWindow()
        self._scraped = Totals()  # llama-server's gauges: the counters at the previous scrape
        # lora_requests_info's value: when its lists last changed, so that scrapes of an
        # idle (or sleeping) server read the same text, as llama-server's do
        self._lora: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self._lora_since = 0.0

    def lora_since(self, load: Load) -> float:
        lists = (load.running, load.waiting)
        if lists != self._lora:
            self._lora, self._lora_since = lists, time.time()
        return self._lora_since

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

    def keep_sampling(self, state: ServerState) -> None:
        """Sample the throughput counters each second from now on (the first scrape)."""

        def read() -> Totals | None:
            if state.sleeping:
                return _totals(self._current(None))
            if state.engine is None:  # loading, or stopped
                return None
            return _totals(self._current(state.engine.engine.metrics()))

        self.window.keep_sampling(read)

    def _current(self, engine_metrics: dict[str, Any] | None) -> dict[str, Any]:
        if engine_metrics is None:  # asleep: the totals already include the frozen engine
            assert self._frozen is not None
            return {**self._frozen, **self._carry}
        m = dict(engine_metrics)
        for k in _COUNTERS:
            m[k] += self._carry[k]
        m["n_tokens_max"] = max(m["n_tokens_max"], self._carry["n_tokens_max"])
        return m

    def scrape(
        self, engine_metrics: dict[str, Any] | None, load: Load | None = None, labels: str = ""
    ) -> list[str]:
        """The exposition lines of the engine's numbers (``None`` while asleep); ``labels``
        go on every series but llama-server's own."""
        m = self._current(engine_metrics)
        load = load or Load()
        kv_ratio = min(1.0, m["kv_usage"])
        totals = _totals(m)
        prompt_rate, gen_rate = self.window.rates(totals)
        # llama-server's two gauges: since the previous scrape, which starts a new window
        last, self._scraped = self._scraped, totals
        prompt_since = rate(totals.n_prompt - last.n_prompt, totals.t_prompt_ms - last.t_prompt_ms)
        gen_since = rate(
            totals.n_predicted - last.n_predicted, totals.t_predicted_ms - last.t_predicted_ms
        )
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
                "generation_tokens_total",
                "Number of generation tokens processed (vLLM: vllm:generation_tokens_total; "
                "the count of llama-server's tokens_predicted_total, labelled).",
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
                "Average prompt throughput in tokens/s since the previous scrape, which "
                "resets it (llama-server's; prompt_tokens_per_second_10s does not reset).",
                prompt_since,
            ),
            (
                "gauge",
                "predicted_tokens_seconds",
                "Average generation throughput in tokens/s since the previous scrape, which "
                "resets it (llama-server's; predicted_tokens_per_second_10s does not reset).",
                gen_since,
            ),
            (
                "gauge",
                "prompt_tokens_per_second_10s",
                "Prompt throughput in tokens/s of processing time over the last 10 s, the "
                "same for every scraper.",
                prompt_rate,
            ),
            (
                "gauge",
                "predicted_tokens_per_second_10s",
                "Generation throughput in tokens/s of processing time over the last 10 s, "
                "the same for every scraper.",
                gen_rate,
            ),
            ("gauge", "requests_processing", "Number of requests processing.", m["n_processing"]),
            ("gauge", "requests_deferred", "Number of requests deferred.", m["n_deferred"]),
            (
                "gauge",
                "num_requests_waiting",
                "Number of requests submitted and not in a slot yet (vLLM: "
                "vllm:num_requests_waiting).",
                m["n_deferred"],
            ),
            (
                "gauge",
                "num_requests_running",
                "Number of requests in a slot, one per slot (vLLM: vllm:num_requests_running).",
                m["n_processing"],
            ),
            (
                "gauge",
                "kv_cache_usage_ratio",
                "KV-cache usage. 1 means 100 percent usage (cells the slots hold, the prompts "
                "idle slots keep included).",
                kv_ratio,
            ),
            (
                "gauge",
                "kv_cache_usage_perc",
                "Fraction of the KV cache held by requests in slots, 0 to 1 (vLLM: "
                "vllm:kv_cache_usage_perc; idle slots' kept prompts are free room).",
                kv_ratio * load.busy_share,
            ),
            (
                "counter",
                "prefix_cache_queries_total",
                "Prefix cache queries: prompt tokens of all requests, evaluated or taken "
                "from a cache (vLLM: vllm:prefix_cache_queries).",
                m["n_prompt_tokens_total"] + m["n_prompt_cached_total"],
            ),
            (
                "counter",
                "prefix_cache_hits_total",
                "Prefix cache hits: prompt tokens taken from a slot's cache, the prompt "
                "cache or another slot's shared prefix (vLLM: vllm:prefix_cache_hits).",
                m["n_prompt_cached_total"],
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
            (
                "counter",
                "tokens_sampled_backend_total",
                "Tokens the sampler chain picked inside the decode graph (backend sampling).",
                m["n_sampled_backend"],
            ),
            (
                "counter",
                "tokens_sampled_split_total",
                "Tokens the host picked after the chain's backend stages ran in the graph.",
                m["n_sampled_split"],
            ),
            (
                "counter",
                "tokens_sampled_host_total",
                "Tokens sampled wholly on the host.",
                m["n_sampled_host"],
            ),
            (
                "counter",
                "draft_tokens_sampled_backend_total",
                "Draft model tokens picked from the top 10 its graph kept "
                "(--spec-draft-backend-sampling).",
                m["n_draft_sampled_backend"],
            ),
        ]
        lines = []
        for kind, name, help_, value in rows:
            series = name if name in LLAMA_SERVER_NAMES or not labels else f"{name}{{{labels}}}"
            lines += [
                f"# HELP llamacpp:{name} {help_}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{series} {value}",
            ]
        return lines


def _totals(m: dict[str, Any]) -> Totals:
    return Totals(
        m["n_prompt_tokens_total"],
        m["t_prompt_ms_total"],
        m["n_predicted_total"],
        m["t_predicted_ms_total"],
    )
