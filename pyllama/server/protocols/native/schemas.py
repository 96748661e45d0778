"""llama-server's own request bodies: /completion, /infill, /tokenize, /detokenize,
/apply-template. Typed and bounded; unknown fields are ignored, as llama-server does."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pyllama.server.http.wire import Body
from pyllama.server.pipeline.schemas import MAX_TOKENS, Prompt, Sampling

__all__ = [
    "CompletionRequest",
    "DetokenizeRequest",
    "InfillRequest",
    "TemplateRequest",
    "TokenizeRequest",
]


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


class TokenizeRequest(Body):
    content: str = Field(..., max_length=16 << 20)
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False


class DetokenizeRequest(Body):
    tokens: list[int] = Field(..., max_length=1 << 22)


class TemplateRequest(Body):
    messages: list[dict[str, Any]] = Field(..., min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    reasoning_format: str | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool | str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
