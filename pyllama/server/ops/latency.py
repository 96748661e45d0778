"""Per-request histograms and counters for /metrics, with vLLM's meanings and bucket edges.

``RequestTimings`` is the ``AsyncEngine``'s observer (``pyllama.engine.RequestObserver``):
the engine front calls it on the event loop when a task's first token event, each later
batch of its token events and its last event arrive there, so recording is a few
additions, with no lock (one thread). It lives in
the server state, not in the engine, so its counts survive the engine freed by a sleep and
the fresh one a wake starts.

Every time runs from the task's submit to the engine (after the request was parsed, its
template rendered and its prompt tokenized; vLLM's clock starts where its engine takes the
request, after tokenization too):

- time to first token: submit → the task's first token event reaches the event loop.
  Observed when it happens, for every task that produces a token (one later cancelled
  too), as vLLM observes it per iteration. Embedding and rerank tasks have none.
- end-to-end: submit → the task's last event (final or error) reaches the event loop, or
  the task is cancelled (the client went away). vLLM counts every finished request,
  aborted ones included (``finished_reason="abort"``), so cancelled and failed tasks count
  here, with the time until they ended.
- time per output token: per request, (end-to-end - time to first token) / (generated
  tokens - 1), for tasks that ended with a final event and generated at least 2 tokens;
  vLLM's ``vllm:request_time_per_output_token_seconds``. (vLLM's older
  ``vllm:time_per_output_token_seconds`` observed every inter-token gap instead; it is
  deprecated there in favour of ``vllm:inter_token_latency_seconds``.)
- inter-token latency: for each later arrival of ``k`` tokens of a task, the time since
  its previous arrival, observed ``k`` times at 1/k of it (vLLM observes the gap of each
  engine step's output; tokens that arrive with the first one are part of the TTFT).
- queue time: submit → the slot starts on the task. The engine does not report that
  instant; its final event carries the slot's prompt and generation times (from the slot's
  start), so queue = end-to-end - (t_prompt_ms + t_predicted_ms) / 1000, clamped to
  [0, end-to-end]. Tasks that ended with a final event (completions and embeddings); a
  cancelled or failed task has no engine times and is not counted here.

Per finished task: ``request_success_total`` by vLLM's ``finished_reason`` (stop, length,
abort, error) and, for tasks with a final event, its prompt tokens (cached ones included)
and generated tokens (``request_prompt_tokens`` / ``request_generation_tokens``).

A task with several completions (``n`` > 1) counts once, with its last completion's
numbers. Counts only grow: histograms are totals since the server started.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyllama.engine import Event, TaskStream

__all__ = ["Histogram", "RequestTimings"]

# vLLM's edges (vllm/v1/metrics/loggers.py)
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TPOT_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
# vLLM's 1-2-5 series (build_1_2_5_buckets), up to a million tokens: vLLM stops at its
# max_model_len; fixed edges here keep the series the same across sleeps and reloads
TOKEN_BUCKETS = (*(float(m * 10**e) for e in range(6) for m in (1, 2, 5)), 1e6)
REQUEST_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


class Histogram:
    """A Prometheus histogram: counts per bucket (``le``: upper edge, inclusive), sum, count."""

    __slots__ = ("count", "counts", "edges", "sum")

    def __init__(self, edges: tuple[float, ...]) -> None:
        self.edges = edges
        self.counts = [0] * (len(edges) + 1)  # the last one: above every edge (+Inf)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.observe_many(value, 1)

    def observe_many(self, value: float, n: int) -> None:
        """``n`` observations of ``value``."""
        self.counts[bisect.bisect_left(self.edges, value)] += n
        self.sum += value * n
        self.count += n

    def lines(self, name: str, help_: str, labels: str) -> list[str]:
        """``labels``: the series' labels (``a="x",b="y"``), before each bucket's ``le``."""
        out = [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
        total = 0
        for edge, n in zip(self.edges, self.counts):
            total += n
            out.append(f'{name}_bucket{{{labels},le="{edge}"}} {total}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


# vLLM's finished_reason values that a pyllama task can end with ("repetition" cannot)
FINISH_REASONS = ("stop", "length", "abort", "error")


def finish_reason(last: Event | None) -> str:
    """vLLM's ``finished_reason`` of a task's last event (``None``: the client went away)."""
    if last is None:
        return "abort"
    if last.type != "final":
        return "abort" if last.error_kind == "cancelled" else "error"
    if last.stop == "cancelled":
        return "abort"
    # as the responses' finish_reason: an end of generation or a stop word is "stop", a
    # budget (n_predict, context, t_max_predict_ms) "length"; "none": a pooling task's end
    return "stop" if last.stop in ("eos", "word", "none") else "length"


class RequestTimings:
    """The per-request histograms and counters; an ``AsyncEngine`` observer."""

    def __init__(self) -> None:
        self.ttft = Histogram(TTFT_BUCKETS)
        self.tpot = Histogram(TPOT_BUCKETS)
        self.itl = Histogram(TPOT_BUCKETS)  # vLLM gives both the same edges
        self.e2e = Histogram(REQUEST_BUCKETS)
        self.queue = Histogram(REQUEST_BUCKETS)
        self.prompt_tokens = Histogram(TOKEN_BUCKETS)
        self.generation_tokens = Histogram(TOKEN_BUCKETS)
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self._last_token: dict[int, float] = {}  # task id -> when its last tokens arrived

    def first_token(self, stream: TaskStream, now: float) -> None:
        self.ttft.observe(now - stream.t_submit)
        self._last_token[stream.task_id] = now

    def tokens(self, stream: TaskStream, n: int, now: float) -> None:
        # n tokens arrived together: the gap since the previous arrival is split evenly
        # among them, so the histogram's sum is the decode time and its count the tokens
        last = self._last_token.get(stream.task_id)
        self._last_token[stream.task_id] = now
        if last is not None:
            self.itl.observe_many((now - last) / n, n)

    def finished(self, stream: TaskStream, last: Event | None, now: float) -> None:
        self._last_token.pop(stream.task_id, None)
        e2e = now - stream.t_submit
        self.e2e.observe(e2e)
        self.success[finish_reason(last)] += 1
        if last is None or last.type != "final":
            return  # cancelled or failed: no engine times
        in_slot = (last.t_prompt_ms + last.t_predicted_ms) / 1e3
        self.queue.observe(min(e2e, max(0.0, e2e - in_slot)))
        self.prompt_tokens.observe(last.n_prompt)
        self.generation_tokens.observe(last.n_predicted)
        n = last.n_predicted
        if n >= 2 and stream.t_first is not None:
            self.tpot.observe((now - stream.t_first) / (n - 1))

    def lines(self, model_name: str, prefix: str = "llamacpp:") -> list[str]:
        """The histograms and the success counter, each series labelled ``model_name`` as
        vLLM labels its own (dashboards made for vLLM filter on it)."""
        labels = 'model_name="' + label_value(model_name) + '"'
        name = prefix + "request_success_total"
        success = [
            f"# HELP {name} Count of finished requests by finished_reason: stop (end of "
            "generation or a stop word), length (n_predict, the context or "
            "t_max_predict_ms), abort (the client went away), error (vLLM: "
            "vllm:request_success_total).",
            f"# TYPE {name} counter",
        ]
        success += [
            f'{name}{{{labels},finished_reason="{reason}"}} {n}'
            for reason, n in self.success.items()
        ]
        return [
            *success,
            *self.ttft.lines(
                prefix + "time_to_first_token_seconds",
                "Histogram of time to first token in seconds: submit to the engine to the "
                "first token (vLLM: vllm:time_to_first_token_seconds).",
                labels,
            ),
            *self.tpot.lines(
                prefix + "request_time_per_output_token_seconds",
                "Histogram of the mean time per output token of each request in seconds: "
                "(e2e - ttft) / (generated tokens - 1), requests of 2 tokens or more "
                "(vLLM: vllm:request_time_per_output_token_seconds).",
                labels,
            ),
            *self.itl.lines(
                prefix + "inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds: one observation per token "
                "after the first, the time since the previous tokens reached the server "
                "(shared evenly by tokens that arrive together) (vLLM: "
                "vllm:inter_token_latency_seconds).",
                labels,
            ),
            *self.e2e.lines(
                prefix + "e2e_request_latency_seconds",
                "Histogram of end-to-end request latency in seconds: submit to the engine "
                "to its last event, cancelled requests included (vLLM: "
                "vllm:e2e_request_latency_seconds).",
                labels,
            ),
            *self.queue.lines(
                prefix + "request_queue_time_seconds",
                "Histogram of time spent waiting for a slot in seconds: e2e minus the "
                "slot's prompt and generation times the engine reports (vLLM: "
                "vllm:request_queue_time_seconds, time in WAITING).",
                labels,
            ),
            *self.prompt_tokens.lines(
                prefix + "request_prompt_tokens",
                "Histogram of the prompt tokens of each finished request, cached ones "
                "included (vLLM: vllm:request_prompt_tokens).",
                labels,
            ),
            *self.generation_tokens.lines(
                prefix + "request_generation_tokens",
                "Histogram of the generated tokens of each finished request (vLLM: "
                "vllm:request_generation_tokens).",
                labels,
            ),
        ]


def label_value(value: str) -> str:
    """A Prometheus label value, escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
