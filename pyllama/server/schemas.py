"""Typed, bounded request models. Unknown fields are ignored (as llama-server does);
known fields with a wrong type or out of range are a 400 naming the field."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AnyObject",
    "ChatRequest",
    "CompletionRequest",
    "DetokenizeRequest",
    "EmbeddingRequest",
    "OAICompletionRequest",
    "TemplateRequest",
    "TokenizeRequest",
]

MAX_TOKENS = 1 << 20
# a string, token ids, a mix, llama-server's JSON prompt object ({"prompt_string": ...}),
# or a list of those (several prompts)
Prompt = Union[str, dict[str, Any], list[Union[int, str, dict[str, Any], list[Union[int, str]]]]]
Stop = Union[str, list[str], None]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AnyObject(_Model):
    """Any JSON object (endpoints that take free-form settings)."""


class Sampling(_Model):
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
    repeat_last_n: int | None = Field(None, ge=-1, le=MAX_TOKENS)
    repeat_penalty: float | None = Field(None, ge=0.0, le=100.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    dry_multiplier: float | None = Field(None, ge=0.0)
    dry_base: float | None = Field(None, ge=0.0)
    dry_allowed_length: int | None = Field(None, ge=0)
    dry_penalty_last_n: int | None = Field(None, ge=-1)
    dry_sequence_breakers: list[str] | None = Field(None, max_length=64)
    mirostat: int | None = Field(None, ge=0, le=2)
    mirostat_tau: float | None = Field(None, ge=0.0)
    mirostat_eta: float | None = Field(None, ge=0.0)
    top_n_sigma: float | None = None
    min_keep: int | None = Field(None, ge=0, le=1 << 16)
    seed: int | None = Field(None, ge=-1, le=(1 << 32) - 1)
    ignore_eos: bool | None = None
    samplers: list[str] | str | None = None
    grammar: str | None = Field(None, max_length=1 << 20)
    json_schema: dict[str, Any] | None = None
    logit_bias: dict[str, float] | list[list[Any]] | None = None
    n_probs: int | None = Field(None, ge=0, le=100)
    post_sampling_probs: bool = False
    stop: Stop = None
    n_predict: int | None = Field(None, ge=-1, le=MAX_TOKENS)
    cache_prompt: bool = True
    id_slot: int = Field(-1, ge=-1)
    t_max_predict_ms: int | None = Field(None, ge=0)
    n_cache_reuse: int | None = Field(None, ge=0)
    spec_n_max: int | None = Field(None, alias="speculative.n_max", ge=0, le=1024)
    spec_n_min: int | None = Field(None, alias="speculative.n_min", ge=0, le=1024)
    spec_p_min: float | None = Field(None, alias="speculative.p_min", ge=0.0, le=1.0)
    lora: list[dict[str, Any]] | None = None
    stream: bool = False
    return_progress: bool = False  # streamed prompt_progress while the prompt is evaluated
    timings_per_token: bool = False  # timings in every streamed chunk
    verbose: bool | None = None  # __verbose (the native result) in the answer; None: -v
    return_tokens: bool = False
    n_keep: int | None = Field(None, ge=-1)
    n_discard: int | None = Field(None, ge=0)


class CompletionRequest(Sampling):
    prompt: Prompt
    n_cmpl: int = Field(1, ge=1, le=128)
    response_fields: list[str] | None = None
    max_tokens: int | None = Field(None, ge=-1, le=MAX_TOKENS)


class InfillRequest(Sampling):
    input_prefix: str | list[int | str]
    input_suffix: str | list[int | str]
    input_extra: list[dict[str, Any]] = Field(default_factory=list, max_length=1024)
    prompt: str = ""
    n_cmpl: int = Field(1, ge=1, le=128)
    response_fields: list[str] | None = None
    max_tokens: int | None = Field(None, ge=-1, le=MAX_TOKENS)


class StreamOptions(_Model):
    include_usage: bool = False


class OAICompletionRequest(Sampling):
    prompt: Prompt
    model: str | None = None
    max_tokens: int | None = Field(None, ge=-1, le=MAX_TOKENS)
    n: int = Field(1, ge=1, le=128)
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: bool = False
    stream_options: StreamOptions | None = None
    suffix: str | None = None


class ChatRequest(Sampling):
    messages: list[dict[str, Any]] = Field(..., min_length=1, max_length=100_000)
    model: str | None = None
    max_tokens: int | None = Field(None, ge=-1, le=MAX_TOKENS)
    max_completion_tokens: int | None = Field(None, ge=-1, le=MAX_TOKENS)
    n: int = Field(1, ge=1, le=128)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    reasoning_format: str | None = None
    stream_options: StreamOptions | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool | None = None


class TokenizeRequest(_Model):
    content: str = Field(..., max_length=16 << 20)
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False


class DetokenizeRequest(_Model):
    tokens: list[int] = Field(..., max_length=1 << 22)


class TemplateRequest(_Model):
    messages: list[dict[str, Any]] = Field(..., min_length=1)
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class EmbeddingRequest(_Model):
    input: Prompt | None = None
    content: Prompt | None = None
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    embd_normalize: int = Field(2, ge=-1, le=1000)
