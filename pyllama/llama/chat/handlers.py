"""Chat handlers registered by name: what ``Llama(chat_format=name)`` answers with when
the name is not one of llama.cpp's templates (``formats.FORMATS``), or when user code
registered it (``llama_chat_format.register_chat_format``: the user's choice wins).

llama-cpp-python's own named formats (alpaca, vicuna, chatml-function-calling ...) live in
``pyllama.compat.llama_cpp``, which registers them here when it is imported: the core never
imports the compat layer (that layer is built on the core, not the reverse). The registry is
a plain dict: registration happens at import, under the import lock.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["get", "lookup", "names", "register"]

Handler = Callable[..., Any]

_user: dict[str, Handler] = {}
_builtin: dict[str, Handler] = {}


def register(name: str, handler: Handler, *, builtin: bool = False) -> None:
    (_builtin if builtin else _user)[name] = handler


def get(name: str) -> Handler | None:
    """Any handler registered under ``name`` (the user's first)."""
    return _user.get(name) or _builtin.get(name)


def lookup(name: str, *, templated: bool) -> Handler | None:
    """The handler ``Llama(chat_format=name)`` uses: a user's registration always; a
    built-in formatter only where llama.cpp has no template of that name (``templated``)."""
    if name in _user:
        return _user[name]
    if templated:
        return None
    return _builtin.get(name)


def names() -> list[str]:
    return sorted({*_user, *_builtin})
