"""/metrics in Prometheus text format, with llama-server's ``llamacpp:`` names.

Counters are totals since the server started, across sleeps (each sleep frees the engine
and a fresh one counts from zero, so the totals of earlier engines are carried). The two
throughput gauges are averaged over the window since the previous scrape, as llama-server's
buckets: a scrape resets them. While asleep the engine's last numbers are served.

Beside llama-server's, the signals gateways and autoscalers read (the Gateway API Inference
Extension's endpoint picker / llm-d, KEDA, Ray), each with the meaning of the vLLM metric
its HELP names: requests waiting (submitted, not in a slot yet) and running (in a slot:
one per slot, so a task of ``n`` completions counts ``n``); KV-cache use of the requests in
slots (``kv_cache_usage_perc``: 0 when idle, where llama-server's ``kv_cache_usage_ratio``
also counts the prompts idle slots keep for reuse, which the engine drops when it needs
the room); LoRA adapters used by running and waiting requests (``lora_requests_info``); the
prefix cache in tokens (queries: every prompt token of every request, evaluated or taken
from a cache; hits: those taken from a slot's own cache, the host prompt cache or another
slot's shared prefix); and the request latency histograms of ``latency``.

With one KV pool for all slots (``--kv-unified``, the default without ``-np``), a prefix
that slots share is held once but counted for each slot that holds it, so both KV ratios
are upper bounds there (capped at 1); with a stream per slot they are exact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyllama.server.ops.latency import label_value

if TYPE_CHECKING:
    from pyllama.engine import AsyncEngine
    from pyllama.server.state import ServerState

__all__ = ["Load", "MetricsBook", "load_of", "render"]

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


def _rate(n: float, ms: float) -> float:
    return 1e3 * n / ms if ms > 0 else 0.0


@dataclass(frozen=True)
class Load:
    """What the slots and the tasks in flight hold at a scrape."""

    busy_share: float = 0.0  # of the KV cells the slots hold, the part busy slots hold
    running: tuple[str, ...] = ()  # adapters used by tasks in a slot
    waiting: tuple[str, ...] = ()  # adapters used by tasks not in a slot yet


def load_of(engine: AsyncEngine, adapters: list[str]) -> Load:
    """The slots first, then the live tasks (whose ready events are taken first): a task
    that ends between the two is in neither list, one admitted between them is waiting."""
    slots = engine.engine.slots()
    live = engine.live()
    in_slot = {s["task_id"] for s in slots if s["state"] != "idle"}
    held = sum(s["n_cache"] for s in slots)
    busy = sum(s["n_cache"] for s in slots if s["state"] != "idle")
    running: set[int] = set()
    waiting: set[int] = set()
    for task in live:
        (running if task.task_id in in_slot else waiting).update(task.adapters)
    return Load(
        busy / held if held else 0.0,
        tuple(adapters[i] for i in sorted(running)),
        tuple(adapters[i] for i in sorted(waiting)),
    )


def _lora_lines(adapters: list[str], load: Load, since: float) -> list[str]:
    name = "llamacpp:lora_requests_info"
    labels = (
        f'max_lora="{len(adapters)}",'
        f'waiting_lora_adapters="{label_value(",".join(load.waiting))}",'
        f'running_lora_adapters="{label_value(",".join(load.running))}"'
    )
    return [
        f"# HELP {name} Running stats on LoRA requests (vLLM: vllm:lora_requests_info): "
        "max_lora = adapters loaded; running_lora_adapters / waiting_lora_adapters = the "
        "adapters (file stems) used with a non-zero scale by requests in a slot / waiting "
        "for one; the value is the Unix time a scrape first saw these lists.",
        f"# TYPE {name} gauge",
        f"{name}{{{labels}}} {since}",
    ]


def render(state: ServerState) -> str:
    """The whole /metrics text (the route checks ``--metrics``; 503 while loading)."""
    engine = None if state.sleeping else state.require()[1]
    adapters = [Path(path).stem for path, _ in state.settings.lora]
    if engine is None:
        m, load = None, Load()
    else:
        m = engine.engine.metrics()
        load = load_of(engine, adapters)
    lines = state.metrics_book.scrape(m, load)
    lines += _lora_lines(adapters, load, state.metrics_book.lora_since(load))
    lines += state.request_timings.lines(state.model_name)
    return "\n".join(lines) + "\n"


class MetricsBook:
    def __init__(self) -> None:
        self._carry: dict[str, Any] = dict.fromkeys(_COUNTERS, 0)
        self._carry["n_tokens_max"] = 0
        self._frozen: dict[str, Any] | None = None  # an engine's last numbers, while asleep
        self._window = dict.fromkeys(("n_prompt", "t_prompt", "n_pred", "t_pred"), 0.0)
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

    def _current(self, engine_metrics: dict[str, Any] | None) -> dict[str, Any]:
        if engine_metrics is None:  # asleep: the totals already include the frozen engine
            assert self._frozen is not None
            return {**self._frozen, **self._carry}
        m = dict(engine_metrics)
        for k in _COUNTERS:
            m[k] += self._carry[k]
        m["n_tokens_max"] = max(m["n_tokens_max"], self._carry["n_tokens_max"])
        return m

    def scrape(self, engine_metrics: dict[str, Any] | None, load: Load | None = None) -> list[str]:
        """The exposition lines of the engine's numbers (``None`` while asleep). Starts a
        new throughput window."""
        m = self._current(engine_metrics)
        load = load or Load()
        kv_ratio = min(1.0, m["kv_usage"])
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
            lines += [
                f"# HELP llamacpp:{name} {help_}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{name} {value}",
            ]
        return lines
