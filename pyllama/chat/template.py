"""A chat template in llama.cpp's C++ Jinja engine (``_core.ChatTemplates``), with the
options llama-server takes from its flags. Templates come from model files, which are
untrusted: no Python code runs while one renders, and the render holds no Python object
(the GIL is released)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyllama import _core
from pyllama.chat.bounded import BoundedRenders, bounds_renders

__all__ = ["ChatTemplate", "ChatTemplateError", "template_kwargs"]


class ChatTemplateError(ValueError):
    """The template does not parse, or refuses the conversation (its raise_exception, a
    message llama.cpp cannot read)."""


def template_kwargs(kwargs: Mapping[str, object] | None, reasoning: str = "auto") -> dict[str, str]:
    """Template variables as llama.cpp holds them (name -> JSON text), as llama-server's
    flags set them: preserve_reasoning on unless set (--reasoning-preserve's default), and
    ``--reasoning on``/``off`` as enable_thinking true/false."""
    out = {k: json.dumps(v) for k, v in (kwargs or {}).items()}
    out.setdefault("preserve_reasoning", "true")
    if reasoning in ("on", "off"):
        out.setdefault("enable_thinking", "true" if reasoning == "on" else "false")
    return out


class ChatTemplate:
    """``source``: a Jinja template text, a llama.cpp built-in name (``chatml``,
    ``llama3`` ...; rendered with ``use_jinja=False`` by llama.cpp's legacy formats) or
    '' for ``model``'s own template (chatml when it has none). ``model`` gives the BOS/EOS
    texts the template sees. The other options are llama-server's flags of the same names:
    ``reasoning_format``, ``reasoning`` (on/off/auto), ``prefill_assistant``,
    ``kwargs`` (--chat-template-kwargs), ``reasoning_budget[_message]``,
    ``force_pure_content`` (--skip-chat-parsing), the projector's modalities."""

    def __init__(
        self,
        source: str = "",
        *,
        model: _core.Model | None = None,
        use_jinja: bool = True,
        reasoning_format: str = "auto",
        reasoning: str = "auto",
        prefill_assistant: bool = True,
        kwargs: Mapping[str, object] | None = None,
        allow_image: bool = False,
        allow_audio: bool = False,
        reasoning_budget: int = -1,
        reasoning_budget_message: str = "",
        force_pure_content: bool = False,
        bounded_model_path: str | None = None,
    ) -> None:
        if not isinstance(source, str):
            raise ChatTemplateError("a chat template is a string")
        self.reasoning_format = reasoning_format
        options: dict[str, Any] = {
            "use_jinja": use_jinja,
            "prefill_assistant": prefill_assistant,
            "reasoning_format": reasoning_format,
            "template_kwargs": template_kwargs(kwargs, reasoning),
            "allow_image": allow_image,
            "allow_audio": allow_audio,
            "reasoning": reasoning,
            "reasoning_budget": reasoning_budget,
            "reasoning_budget_message": reasoning_budget_message,
            "force_pure_content": force_pure_content,
        }
        try:
            self.core = _core.ChatTemplates(model, source, **options)
        except (RuntimeError, ValueError) as e:
            raise ChatTemplateError(f"chat template parsing error: {e}") from e
        # renders of an untrusted template in bounded worker processes (the server's); the
        # model file's vocabulary gives them its BOS/EOS texts and template variants
        self._bounded: BoundedRenders | None = None
        if bounded_model_path is not None and bounds_renders():
            self._bounded = BoundedRenders(bounded_model_path, source, options)

    def close(self) -> None:
        """Stop the bounded render workers, if any."""
        if self._bounded is not None:
            self._bounded.close()
            self._bounded = None

    @property
    def source(self) -> str:
        return self.core.source()

    @property
    def tool_use_source(self) -> str:
        """The tool-use variant's text ('' when the model has none)."""
        return self.core.source("tool_use")

    @property
    def caps(self) -> dict[str, bool]:
        """llama.cpp's chat_template_caps (what /props shows)."""
        return dict(self.core.caps)

    @property
    def supports_thinking(self) -> bool:
        return self.core.supports_thinking

    def params(self, body: Mapping[str, Any]) -> str:
        """llama-server's task parameters (JSON text) for an OpenAI chat body;
        ChatTemplateError for what llama-server refuses (its 400s, and a template that
        raises, its 500s)."""
        try:
            text = json.dumps(body, ensure_ascii=False)
            if self._bounded is not None:
                return self._bounded.params(text)
            return self.core.chat_params(text)
        except (TimeoutError, MemoryError) as e:  # past a bound (BoundedRenders)
            raise ChatTemplateError(f"chat template: {e}") from e
        except (ValueError, TypeError, RuntimeError) as e:
            # llama.cpp's Jinja engine reports where a render failed ("While executing ...")
            text = str(e)
            raise ChatTemplateError(
                f"chat template raised: {text}" if "While executing" in text else text
            ) from e

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text for OpenAI-shaped ``messages`` (and ``tools``); ``kwargs`` are
        template variables (chat_template_kwargs)."""
        body: dict[str, Any] = {"messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        if not add_generation_prompt:
            body["add_generation_prompt"] = False
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        return str(json.loads(self.params(body))["prompt"])
