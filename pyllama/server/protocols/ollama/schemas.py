"""Ollama request bodies, typed and bounded. Unknown fields (and unknown ``options``) are
ignored, as Ollama does; known ones with a wrong type are a 400 naming the field."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatRequest",
    "EmbedRequest",
    "EmbeddingsRequest",
    "GenerateRequest",
    "Message",
    "Options",
    "ShowRequest",
]

MAX_TOKENS = 1 << 20
# "json", "" (plain text) or a JSON schema
Format = Union[str, dict[str, Any], None]
# a level ("high", ...) is what gpt-oss style templates read as reasoning_effort
Think = Union[bool, Literal["high", "medium", "low"], None]
KeepAlive = Union[float, str, None]  # seconds or a Go duration such as "5m"; not honoured


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Options(_Model):
    """Ollama's ``options``. Sampling fields are range-checked by ``Sampling``."""

    # honoured
    num_predict: int | None = Field(None, ge=-2, le=MAX_TOKENS)  # -1 no limit, -2 fill context
    num_ctx: int | None = Field(None, ge=1)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    typical_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    mirostat: int | None = None
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    # accepted and ignored: load-time settings belong to the server's command line
    num_keep: int | None = None
    tfs_z: float | None = None
    penalize_newline: bool | None = None
    numa: bool | None = None
    num_batch: int | None = None
    num_gpu: int | None = None
    main_gpu: int | None = None
    low_vram: bool | None = None
    f16_kv: bool | None = None
    logits_all: bool | None = None
    vocab_only: bool | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None
    embedding_only: bool | None = None
    num_thread: int | None = None


class ToolFunction(_Model):
    name: str = Field(..., min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)  # an object, not JSON text
    index: int | None = None


class ToolCall(_Model):
    id: str | None = None
    function: ToolFunction


class Message(_Model):
    role: str
    content: str | None = None
    thinking: str | None = None
    images: list[Any] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None


class _Generation(_Model):
    model: str = ""
    format: Format = None
    options: Options | None = None
    stream: bool = True  # Ollama streams unless told not to
    keep_alive: KeepAlive = None
    think: Think = None
    logprobs: bool | None = None
    top_logprobs: int | None = None


class ChatRequest(_Generation):
    messages: list[Message] = Field(..., min_length=1, max_length=100_000)
    tools: list[dict[str, Any]] | None = None


class GenerateRequest(_Generation):
    prompt: str = Field(..., min_length=1)
    suffix: str | None = None
    system: str | None = None
    template: str | None = None
    context: list[int] | None = None  # accepted and ignored
    raw: bool = False
    images: list[Any] | None = None


class EmbedRequest(_Model):
    model: str = ""
    input: str | list[str]
    truncate: bool = True
    options: Options | None = None
    keep_alive: KeepAlive = None
    dimensions: int | None = Field(None, ge=1)


class EmbeddingsRequest(_Model):
    model: str = ""
    prompt: str = Field(..., min_length=1)
    options: Options | None = None
    keep_alive: KeepAlive = None


class ShowRequest(_Model):
    model: str = ""
    name: str = ""  # the older spelling of ``model``
    verbose: bool = False
