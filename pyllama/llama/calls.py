"""The arguments of llama-cpp-python's calls, with its names, order and defaults, for the
engine-backed fronts: ``completion_call(*args, **kwargs)`` binds a call exactly as
``Llama.create_completion`` would and returns its arguments by name."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, Union

from pyllama.llama.sampler_chain import SamplerArgs

__all__ = ["chat_call", "completion_call", "sampler_args", "with_signature"]

Prompt = Union[str, Sequence[int]]
F = TypeVar("F", bound=Callable[..., Any])


def completion_call(
    prompt: Prompt,
    suffix: str | None = None,
    max_tokens: int | None = 16,
    temperature: float = 0.8,
    top_p: float = 0.95,
    min_p: float = 0.05,
    typical_p: float = 1.0,
    logprobs: int | None = None,
    echo: bool = False,
    stop: str | list[str] | None = None,
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    repeat_penalty: float = 1.0,
    top_k: int = 40,
    stream: bool = False,
    seed: int | None = None,
    tfs_z: float = 1.0,
    mirostat_mode: int = 0,
    mirostat_tau: float = 5.0,
    mirostat_eta: float = 0.1,
    model: str | None = None,
    stopping_criteria: Any = None,
    logits_processor: Any = None,
    grammar: Any = None,
    logit_bias: Mapping[Any, float] | None = None,
) -> dict[str, Any]:
    return dict(locals())


def chat_call(
    messages: Any,
    functions: list[dict[str, Any]] | None = None,
    function_call: Any = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    temperature: float = 0.2,
    top_p: float = 0.95,
    top_k: int = 40,
    min_p: float = 0.05,
    typical_p: float = 1.0,
    stream: bool = False,
    stop: str | list[str] | None = None,
    seed: int | None = None,
    response_format: Mapping[str, Any] | None = None,
    max_tokens: int | None = None,
    presence_penalty: float = 0.0,
    frequency_penalty: float = 0.0,
    repeat_penalty: float = 1.0,
    tfs_z: float = 1.0,
    mirostat_mode: int = 0,
    mirostat_tau: float = 5.0,
    mirostat_eta: float = 0.1,
    model: str | None = None,
    logits_processor: Any = None,
    grammar: Any = None,
    logit_bias: Mapping[Any, float] | None = None,
    logprobs: bool | None = None,
    top_logprobs: int | None = None,
) -> dict[str, Any]:
    return dict(locals())


_SAMPLER_FIELDS = ("top_k", "top_p", "min_p", "typical_p", "repeat_penalty", "frequency_penalty",
                   "presence_penalty", "tfs_z", "mirostat_mode", "mirostat_tau", "mirostat_eta")  # fmt: skip


def sampler_args(call: Mapping[str, Any]) -> SamplerArgs:
    """The sampling part of a bound call (``temperature`` is the chain's ``temp``)."""
    return SamplerArgs(temp=call["temperature"], **{k: call[k] for k in _SAMPLER_FIELDS})


def with_signature(bind: Callable[..., Any]) -> Callable[[F], F]:
    """Give a ``(self, *args, **kwargs)`` method the signature of ``bind`` (for help()
    and editors)."""

    def wrap(method: F) -> F:
        params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        params += list(inspect.signature(bind).parameters.values())
        method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return method

    return wrap
