"""llama-cpp-python's ``llama_chat_format``: chat formatters (messages to a prompt), the
handlers made from them, the registry behind ``Llama(chat_format=...)`` and
``register_chat_format``, and formatters from a Hugging Face ``tokenizer_config.json``.

A formatter returns a ``ChatFormatterResponse`` (the prompt, its stop strings, and whether
the prompt already holds the BOS token). A handler is what ``Llama(chat_handler=...)``
takes: called as ``handler(llama=..., messages=..., **the chat call)``, it answers as
``create_chat_completion``. Formats registered here are found by name by
``pyllama.Llama(chat_format=...)`` before llama.cpp's built-in templates.

The multimodal handlers (``MTMDChatHandler``, ``Llava15ChatHandler``...) run in-process on
llama.cpp's projector (``pyllama.llama.chat.multimodal``). Not here: the function-calling
handler functionary (pyllama's ``Llama`` does tools with the model's own template, through
llama.cpp's chat layer); chatml-function-calling is in ``function_calling``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, Protocol

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pyllama.compat.llama_cpp import types as llama_types
from pyllama.compat.llama_cpp.layouts import render, system_text, turns
from pyllama.llama.chat import handlers as _registry
from pyllama.llama.chat.multimodal import (
    Gemma3ChatHandler,
    Llama3VisionAlphaChatHandler,
    Llava15ChatHandler,
    Llava16ChatHandler,
    MiniCPMv26ChatHandler,
    MoondreamChatHandler,
    MTMDChatHandler,
    NanoLlavaChatHandler,
    ObsidianChatHandler,
    Qwen25VLChatHandler,
)

__all__ = [
    "ChatFormatter",
    "ChatFormatterResponse",
    "Gemma3ChatHandler",
    "Jinja2ChatFormatter",
    "Llama3VisionAlphaChatHandler",
    "LlamaChatCompletionHandler",
    "LlamaChatCompletionHandlerNotFoundException",
    "Llava15ChatHandler",
    "Llava16ChatHandler",
    "MTMDChatHandler",
    "MiniCPMv26ChatHandler",
    "MoondreamChatHandler",
    "NanoLlavaChatHandler",
    "ObsidianChatHandler",
    "Qwen25VLChatHandler",
    "chat_formatter_to_chat_completion_handler",
    "get_chat_completion_handler",
    "hf_tokenizer_config_to_chat_completion_handler",
    "hf_tokenizer_config_to_chat_formatter",
    "register_chat_completion_handler",
    "register_chat_format",
]

Messages = Sequence[llama_types.ChatCompletionRequestMessage]


@dataclasses.dataclass
class ChatFormatterResponse:
    """A formatted prompt; ``added_special``: it already starts with the BOS text, so it is
    tokenized without adding one."""

    prompt: str
    stop: str | list[str] | None = None
    stopping_criteria: Any = None
    added_special: bool = False


class ChatFormatter(Protocol):
    def __call__(self, *, messages: Messages, **kwargs: Any) -> ChatFormatterResponse: ...


class LlamaChatCompletionHandler(Protocol):
    def __call__(self, *, llama: Any, messages: Messages, **kwargs: Any) -> Any: ...


class LlamaChatCompletionHandlerNotFoundException(Exception):
    pass


def register_chat_completion_handler(
    name: str,
) -> Callable[[LlamaChatCompletionHandler], LlamaChatCompletionHandler]:
    """Decorator: ``Llama(chat_format=name)`` answers chats with this handler."""

    def decorator(handler: LlamaChatCompletionHandler) -> LlamaChatCompletionHandler:
        _registry.register(name, handler)
        return handler

    return decorator


def get_chat_completion_handler(name: str) -> LlamaChatCompletionHandler:
    handler = _registry.get(name)
    if handler is None:
        raise LlamaChatCompletionHandlerNotFoundException(
            f"Invalid chat handler: {name} (valid formats: {sorted(_registry.names())})"
        )
    return handler


def register_chat_format(name: str) -> Callable[[ChatFormatter], ChatFormatter]:
    """Decorator: the formatter becomes the handler of ``Llama(chat_format=name)``."""
    return _registering(name, builtin=False)


def _registering(name: str, *, builtin: bool) -> Callable[[ChatFormatter], ChatFormatter]:
    def decorator(formatter: ChatFormatter) -> ChatFormatter:
        handler = chat_formatter_to_chat_completion_handler(formatter)
        _registry.register(name, handler, builtin=builtin)
        return formatter

    return decorator


def _builtin_format(name: str) -> Callable[[ChatFormatter], ChatFormatter]:
    """llama-cpp-python's own formats: used where llama.cpp has no template of the name."""
    return _registering(name, builtin=True)


# ------------------------------------------------------------- handlers


_COMPLETION_KEYS = (
    "temperature", "top_p", "top_k", "min_p", "typical_p", "stream", "seed", "max_tokens",
    "presence_penalty", "frequency_penalty", "repeat_penalty", "tfs_z", "mirostat_mode",
    "mirostat_tau", "mirostat_eta", "model", "logits_processor", "grammar", "logit_bias",
)  # fmt: skip


def chat_formatter_to_chat_completion_handler(
    formatter: ChatFormatter,
) -> LlamaChatCompletionHandler:
    """A handler that formats the chat, completes the prompt with ``llama`` and answers in
    the chat shape (the stop strings of the call and of the format both end the text)."""

    def handler(*, llama: Any, messages: Messages, **call: Any) -> Any:
        formatted = formatter(
            messages=messages,
            functions=call.get("functions"),
            function_call=call.get("function_call"),
            tools=call.get("tools"),
            tool_choice=call.get("tool_choice"),
        )
        if call.get("tools") or call.get("functions"):
            raise ValueError(
                "tools/functions need a chat format that renders them: use the model's own "
                "template (no chat_format) or a chat_handler that does"
            )
        tokens = llama.tokenize(
            formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
        )
        stops = _as_list(call.get("stop")) + _as_list(formatted.stop)
        kwargs = {k: call[k] for k in _COMPLETION_KEYS if call.get(k) is not None}
        if call.get("response_format"):
            kwargs["grammar"] = _grammar_for(call["response_format"])
        if call.get("logprobs"):
            kwargs["logprobs"] = call.get("top_logprobs") or 0
        if formatted.stopping_criteria is not None:
            kwargs["stopping_criteria"] = formatted.stopping_criteria
        result = llama.create_completion(prompt=tokens, stop=stops, **kwargs)
        if kwargs.get("stream"):
            return _chat_chunks(result)
        return _chat_response(result)

    return handler


def _as_list(stop: Any) -> list[str]:
    return [stop] if isinstance(stop, str) else list(stop or [])


def _grammar_for(response_format: Mapping[str, Any]) -> Any:
    from pyllama.llama import LlamaGrammar
    from pyllama.llama.grammar import JSON_GBNF

    if response_format.get("type") != "json_object":
        return None
    schema = response_format.get("schema")
    if schema is not None:
        import json

        return LlamaGrammar.from_json_schema(json.dumps(schema))
    return LlamaGrammar.from_string(JSON_GBNF)


def _chat_response(completion: Mapping[str, Any]) -> dict[str, Any]:
    choice = completion["choices"][0]
    return {
        "id": "chat" + completion["id"],
        "object": "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": choice["text"]},
                "logprobs": _chat_logprobs(choice.get("logprobs")),
                "finish_reason": choice["finish_reason"],
            }
        ],
        "usage": completion["usage"],
    }


def _chat_logprobs(lp: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not lp:
        return None
    content = []
    for token, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        alternatives = [{"token": t, "logprob": v, "bytes": None} for t, v in (top or {}).items()]
        content.append(
            {"token": token, "logprob": logprob, "bytes": None, "top_logprobs": alternatives}
        )
    return {"content": content, "refusal": None}


def _chat_chunks(chunks: Iterator[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    first = True
    for chunk in chunks:
        meta = {
            "id": "chat" + chunk["id"],
            "object": "chat.completion.chunk",
            "created": chunk["created"],
            "model": chunk["model"],
        }
        if first:
            first = False
            role = {"index": 0, "delta": {"role": "assistant"}, "logprobs": None,
                    "finish_reason": None}  # fmt: skip
            yield {**meta, "choices": [role]}
        choice = chunk["choices"][0]
        if choice["finish_reason"] is not None:
            if choice["text"]:
                delta = {"index": 0, "delta": {"content": choice["text"]}, "logprobs": None,
                         "finish_reason": None}  # fmt: skip
                yield {**meta, "choices": [delta]}
            end = {"index": 0, "delta": {}, "logprobs": None,
                   "finish_reason": choice["finish_reason"]}  # fmt: skip
            yield {**meta, "choices": [end]}
        else:
            delta = {"index": 0, "delta": {"content": choice["text"]},
                     "logprobs": _chat_logprobs(choice.get("logprobs")), "finish_reason": None}  # fmt: skip
            yield {**meta, "choices": [delta]}


# ---------------------------------------------------------------- Jinja2


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


class Jinja2ChatFormatter:
    """A chat template (Jinja, as in a model's ``tokenizer_config.json``) as a formatter."""

    def __init__(
        self,
        template: str,
        eos_token: str,
        bos_token: str,
        add_generation_prompt: bool = True,
        stop_token_ids: list[int] | None = None,
    ) -> None:
        self.template = template
        self.eos_token = eos_token
        self.bos_token = bos_token
        self.add_generation_prompt = add_generation_prompt
        self.stop_token_ids = stop_token_ids
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
        self._template = env.from_string(template)

    def __call__(
        self,
        *,
        messages: Messages,
        functions: Any = None,
        function_call: Any = None,
        tools: Any = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatFormatterResponse:
        prompt = self._template.render(
            messages=messages,
            eos_token=self.eos_token,
            bos_token=self.bos_token,
            add_generation_prompt=self.add_generation_prompt,
            functions=functions,
            function_call=function_call,
            tools=tools,
            tool_choice=tool_choice,
        )
        return ChatFormatterResponse(prompt=prompt, stop=[self.eos_token], added_special=True)

    def to_chat_handler(self) -> LlamaChatCompletionHandler:
        return chat_formatter_to_chat_completion_handler(self)


def _token_text(value: Any) -> str:
    """A tokenizer_config token: a string, or an AddedToken dict with its ``content``."""
    if isinstance(value, Mapping):
        value = value.get("content")
    if not isinstance(value, str):
        raise ValueError(f"tokenizer_config: expected a token string, got {value!r}")
    return value


def hf_tokenizer_config_to_chat_formatter(
    tokenizer_config: Mapping[str, Any], add_generation_prompt: bool = True
) -> ChatFormatter:
    """The formatter of a ``tokenizer_config.json``'s ``chat_template``. With
    ``add_generation_prompt`` an empty assistant turn ends the messages (llama-cpp-python's
    behaviour, which templates without ``add_generation_prompt`` also honour)."""
    template = tokenizer_config.get("chat_template")
    if not isinstance(template, str):
        raise ValueError("tokenizer_config has no chat_template string")
    bos = _token_text(tokenizer_config.get("bos_token"))
    eos = _token_text(tokenizer_config.get("eos_token"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    compiled = env.from_string(template)

    def formatter(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
        if add_generation_prompt:
            messages = [*messages, {"role": "assistant", "content": ""}]
        prompt = compiled.render(messages=messages, bos_token=bos, eos_token=eos, **kwargs)
        return ChatFormatterResponse(prompt=prompt, stop=[eos, bos], added_special=True)

    return formatter


def hf_tokenizer_config_to_chat_completion_handler(
    tokenizer_config: Mapping[str, Any], add_generation_prompt: bool = True
) -> LlamaChatCompletionHandler:
    return chat_formatter_to_chat_completion_handler(
        hf_tokenizer_config_to_chat_formatter(tokenizer_config, add_generation_prompt)
    )


# ------------------------------------------------- the named formats


def _response(prompt: str, stop: str | None = None) -> ChatFormatterResponse:
    return ChatFormatterResponse(prompt=prompt, stop=stop)


@_builtin_format("llama-2")
def format_llama2(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = system_text(messages)
    if system:
        system = f"[INST] <<SYS>>\n{system}\n<</SYS>>"
    items = turns(messages, {"user": "<s>[INST]", "assistant": "[/INST]"})
    return _response(render("llama2", system, items, " ", "</s>") + "[/INST]")


@_builtin_format("llama-3")
def format_llama3(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    header = "<|start_header_id|>{}<|end_header_id|>\n\n".format
    markers = {r: header(r) for r in ("system", "user", "assistant")}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("plain", "", items, "<|eot_id|>"), "<|eot_id|>")


@_builtin_format("alpaca")
def format_alpaca(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    items = turns(messages, {"user": "### Instruction", "assistant": "### Response"})
    return _response(render("colon_two", system_text(messages), items, "\n\n", "</s>"))


@_builtin_format("qwen")
def format_qwen(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = "<|im_start|>system\n" + (system_text(messages) or "You are a helpful assistant.")
    markers = {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("chatml", system, items, "<|im_end|>"), "<|endoftext|>")


_VICUNA_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant "
    "gives helpful, detailed, and polite answers to the user's questions."
)


@_builtin_format("vicuna")
def format_vicuna(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    items = [*turns(messages, {"user": "USER", "assistant": "ASSISTANT"}), ("ASSISTANT", None)]
    return _response(render("colon_two", _VICUNA_SYSTEM, items, " ", "</s>"))


@_builtin_format("oasst_llama")
def format_oasst_llama(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = f"[INST] <<SYS>>\n{system_text(messages)}\n<</SYS>>\n\n"
    markers = {"user": "<|prompter|>", "assistant": "<|assistant|>"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("plain", system, items, "</s>"))


def _baichuan(user: str, assistant: str, messages: Messages) -> ChatFormatterResponse:
    items = [*turns(messages, {"user": user, "assistant": assistant}), (assistant, None)]
    return _response(render("plain", system_text(messages), items, ""))


@_builtin_format("baichuan-2")
def format_baichuan2(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    return _baichuan("<reserved_106>", "<reserved_107>", messages)


@_builtin_format("baichuan")
def format_baichuan(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    return _baichuan("<reserved_102>", "<reserved_103>", messages)


@_builtin_format("redpajama-incite")
def format_redpajama_incite(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    items = [*turns(messages, {"user": "<human>", "assistant": "<bot>"}), ("<bot>", None)]
    return _response(render("colon", system_text(messages), items, "\n"), "<human>")


@_builtin_format("phind")
def format_phind(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = "### System Prompt\nYou are an intelligent programming assistant."
    markers = {"user": "### User Message", "assistant": "### Assistant"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("colon", system, items, "\n\n"))


@_builtin_format("intel")
def format_intel(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    # llama-cpp-python leaves the system text's placeholder as it is
    markers = {"user": "### User:", "assistant": "### Assistant:"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("colon", "### System:\n{system_message}", items, "\n"))


@_builtin_format("mistrallite")
def format_mistrallite(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = f"<|system|>{system_text(messages)}</s>"
    markers = {"user": "<|prompter|>", "assistant": "</s>\n<|assistant|>"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("plain", system, items, " "))


@_builtin_format("zephyr")
def format_zephyr(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = f"<|system|>\n{system_text(messages)}"
    markers = {"user": "<|user|>\n", "assistant": "<|assistant|>\n"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("chatml", system, items, "</s>"), "</s>")


@_builtin_format("pygmalion")
def format_pygmalion(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = f"<|system|>{system_text(messages)}"
    items = [*turns(messages, {"user": "<|user|>", "assistant": "<|model|>"}), ("<|model|>", None)]
    return _response(render("chatml", system, items, "\n"), "\n")


@_builtin_format("chatml")
def format_chatml(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = f"<|im_start|>system\n{system_text(messages)}"
    markers = {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("chatml", system, items, "<|im_end|>"), "<|im_end|>")


@_builtin_format("mistral-instruct")
def format_mistral_instruct(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    """Mistral's v1 instruct layout; the BOS is the tokenizer's (not in the text)."""
    prompt = ""
    for m in messages:
        content = m.get("content")
        if m["role"] == "user" and isinstance(content, str):
            prompt += "[INST] " + content
        elif m["role"] == "assistant" and content is not None:
            prompt += " [/INST]" + content + "</s>"
    return _response(prompt + " [/INST]", "</s>")


@_builtin_format("chatglm3")
def format_chatglm3(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = f"<|system|>\n{system_text(messages)}"
    markers = {"user": "<|user|>", "assistant": "<|assistant|>"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("glm", system, items, "</s>"), "</s>")


@_builtin_format("openchat")
def format_openchat(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    system = f"{system_text(messages)}<|end_of_turn|>"
    markers = {
        "user": "GPT4 Correct User: ",
        "assistant": "<|end_of_turn|>GPT4 Correct Assistant: ",
    }
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("chatml", system, items, "<|end_of_turn|>"), "<|end_of_turn|>")


@_builtin_format("saiga")
def format_saiga(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    items = turns(messages, {"user": "user", "bot": "bot", "system": "system"})
    prompt = "".join(f"<s>{r}\n{t}</s>" if t else f"<s>{r}\n" for r, t in items)
    return _response((prompt + "<s>bot").strip())


@_builtin_format("gemma")
def format_gemma(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
    # Gemma has no system role: a system message is left out, as llama-cpp-python does
    markers = {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"}
    items = [*turns(messages, markers), (markers["assistant"], None)]
    return _response(render("plain", "", items, "<end_of_turn>\n"), "<end_of_turn>\n")


# llama-cpp-python's chatml-function-calling, registered by importing it
from pyllama.compat.llama_cpp import function_calling as _function_calling  # noqa: E402, F401
