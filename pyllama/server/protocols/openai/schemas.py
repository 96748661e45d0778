"""OpenAI request bodies: /v1/completions, /v1/chat/completions, /v1/embeddings (and
llama-server's /embedding). Typed and bounded; unknown fields are ignored."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pyllama.server.http.wire import Body
from pyllama.server.pipeline.schemas import MAX_TOKENS, Prompt, Sampling

__all__ = ["ChatRequest", "EmbeddingRequest", "OAICompletionRequest", "StreamOptions"]


class StreamOptions(Body):
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


class EmbeddingRequest(Body):
    input: Prompt | None = None
    content: Prompt | None = None
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    embd_normalize: int | None = Field(None, ge=-1, le=1000)  # None: --embd-normalize
