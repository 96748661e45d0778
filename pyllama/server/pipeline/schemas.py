"""The request fields every generating protocol shares: llama-server's sampling fields
(``Sampling``, which each protocol's request extends), prompts and their bounds. Known
fields with a wrong type or out of range are a 400 naming the field."""

from __future__ import annotations

from typing import Any, Union

from pydantic import Field

from pyllama.server.http.wire import Body

__all__ = ["MAX_TOKENS", "Prompt", "Sampling", "Stop"]

MAX_TOKENS = 1 << 20
# a string, token ids, a mix, llama-server's JSON prompt object ({"prompt_string": ...}),
# or a list of those (several prompts)
Prompt = Union[str, dict[str, Any], list[Union[int, str, dict[str, Any], list[Union[int, str]]]]]
Stop = Union[str, list[str], None]


class Sampling(Body):
    """llama-server's sampling fields, shared by every generation endpoint."""

    temperature: float | None = Field(None, ge=0.0, le=100.0)
    temp: float | None = Field(None, ge=0.0, le=100.0)
    top_k: int | None = Field(None, ge=-1, le=1 << 20)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    typical_p: float | None = Field(None, ge=0.0, le=1.0)
    xtc_probability: float | None = Field(None, ge=0.0, le=1.0)
    xtc_threshold: float | None = Field(None, ge=0.0, le=1.0)
    dynatemp_range: float | None = Field(None, ge=0.0)
    dynatemp_exponent: float | None = Field(None, ge=0.0)
    repeat_last_n: int | None = Field(None, ge=0, le=MAX_TOKENS)  # -1: 400, as llama-server
    repeat_penalty: float | None = Field(None, ge=0.0, le=100.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    dry_multiplier: float | None = Field(None, ge=0.0)
    dry_base: float | None = Field(None, ge=0.0)
    dry_allowed_length: int | None = Field(None, ge=0)
    dry_penalty_last_n: int | None = Field(None, ge=0)
    dry_sequence_breakers: list[str] | None = Field(None, max_length=64)
    mirostat: int | None = Field(None, ge=0, le=2)
    mirostat_tau: float | None = Field(None, ge=0.0)
    mirostat_eta: float | None = Field(None, ge=0.0)
    top_n_sigma: float | None = None
    adaptive_target: float | None = Field(None, le=1.0)  # negative: adaptive-p is off
    adaptive_decay: float | None = Field(None, ge=0.0, le=0.99)
    min_keep: int | None = Field(None, ge=0, le=1 << 16)
    seed: int | None = Field(None, ge=-1, le=(1 << 32) - 1)
    ignore_eos: bool | None = None
    samplers: list[str] | str | None = None
    grammar: str | None = Field(None, max_length=1 << 20)
    json_schema: dict[str, Any] | None = None
    logit_bias: dict[str, float] | list[list[Any]] | None = None
    n_probs: int | None = Field(None, ge=0, le=100)
    post_sampling_probs: bool = False
    backend_sampling: bool | None = None  # None: the server's (-bs)
    stop: Stop = None
    n_predict: int | None = Field(None, ge=-1, le=MAX_TOKENS)
    cache_prompt: bool | None = None  # None: the server's (--no-cache-prompt)
    id_slot: int = Field(-1, ge=-1)
    # admission order among requests waiting for a slot: lower first (vLLM's meaning)
    priority: int = Field(0, ge=-(1 << 31), le=(1 << 31) - 1)
    t_max_predict_ms: int | None = Field(None, ge=0)
    n_cache_reuse: int | None = Field(None, ge=0)
    spec_n_max: int | None = Field(None, alias="speculative.n_max", ge=0, le=1024)
    spec_n_min: int | None = Field(None, alias="speculative.n_min", ge=0, le=1024)
    spec_p_min: float | None = Field(None, alias="speculative.p_min", ge=0.0, le=1.0)
    lora: list[dict[str, Any]] | None = None
    # a loaded adapter's name (file stem) runs with that adapter alone, as vLLM; `lora` wins
    model: str | None = Field(None, max_length=1 << 12)
    stream: bool = False
    return_progress: bool = False  # streamed prompt_progress while the prompt is evaluated
    sse_ping_interval: int | None = Field(None, ge=-1, le=(1 << 31) - 1)  # None: the server's
    # llama-server's reasoning budget (see pipeline.budget); a chat takes the tags from its
    # template, a completion from these
    reasoning_budget_tokens: int | None = Field(None, ge=-1, le=(1 << 31) - 1)
    thinking_budget_tokens: int | None = Field(None, ge=-1, le=(1 << 31) - 1)
    reasoning_budget_message: str | None = Field(None, max_length=1 << 16)
    reasoning_control: bool = False
    reasoning_budget_start_tag: str | None = Field(None, max_length=256)
    reasoning_budget_end_tags: list[str] | None = Field(None, max_length=16)
    reasoning_budget_end_tag: str | None = Field(None, max_length=256)
    generation_prompt: str | None = Field(None, max_length=1 << 16)
    timings_per_token: bool = False  # timings in every streamed chunk
    verbose: bool | None = None  # __verbose (the native result) in the answer; None: -v
    return_tokens: bool = False
    n_keep: int | None = Field(None, ge=-1)
    n_discard: int | None = Field(None, ge=0)

    def ping_s(self, default: int) -> int:
        """Seconds of stream silence before a ``:`` ping: the request's, else ``default``."""
        return default if self.sse_ping_interval is None else self.sse_ping_interval
