"""llama-cpp-python's ``chat_format`` names, resolved to chat templates.

Precedence as llama-cpp-python: ``chat_handler``, then ``chat_format``, then the GGUF's
``tokenizer.chat_template``, then ``llama-2``. The named formats are llama-cpp-python's
Python formatters; pyllama renders each with llama.cpp's built-in format of the same
family (same roles and special tokens; whitespace may differ), through llama.cpp's chat
layer like every template. Formats with no llama.cpp counterpart raise a ValueError
naming them (or take llama-cpp-python's own formatter, ``handlers``).
"""

from __future__ import annotations

from pyllama import _core
from pyllama.chat import ChatTemplate

__all__ = ["FORMATS", "resolve_template"]

# llama-cpp-python name -> llama.cpp built-in name (its legacy formats, no Jinja)
FORMATS = {
    "llama-2": "llama2-sys",
    "llama-3": "llama3",
    "chatml": "chatml",
    "qwen": "chatml",
    "mistral-instruct": "mistral-v1",
    "gemma": "gemma",
    "zephyr": "zephyr",
    "vicuna": "vicuna",
    "openchat": "openchat",
    "chatglm3": "chatglm3",
}


def resolve_template(model: _core.Model, chat_format: str | None) -> tuple[str, ChatTemplate]:
    """(the resolved format name as ``Llama.chat_format``, its template)."""
    if chat_format is None:
        if model.chat_template():
            return "chat_template.default", ChatTemplate("", model=model)
        chat_format = "llama-2"
    if chat_format.startswith("chat_template."):
        name = chat_format.removeprefix("chat_template.")
        source = model.chat_template("" if name == "default" else name)
        if not source:
            raise ValueError(f"chat_format={chat_format!r}: the model has no such template")
        return chat_format, ChatTemplate(source, model=model)
    builtin = FORMATS.get(chat_format)
    if builtin is None:
        from pyllama.llama.chat import handlers

        known = sorted({*FORMATS, *handlers.names()})
        raise ValueError(
            f"chat_format={chat_format!r} is not available in pyllama; use one of "
            f"{', '.join(known)}, chat_template.default, or a chat_handler (llama-cpp-python's "
            "own formats, such as alpaca or chatml-function-calling, are there once "
            "pyllama.compat.llama_cpp is imported)"
        )
    return chat_format, ChatTemplate(builtin, model=model, use_jinja=False)
