"""The one chat path of pyllama, library and server alike, over llama.cpp's own chat layer
(``_core.ChatTemplates``: common/chat and llama-server's request parse, bound): templates
rendered by llama.cpp's C++ Jinja engine, tool-call grammars and lazy triggers, reasoning
and tool-call parsing, whole and streamed. No template or tool syntax is re-implemented in
Python: a vendor bump brings llama.cpp's new families with it."""

from __future__ import annotations

from pyllama.chat.plan import ChatPlan, ChatReader, ToolCall, plan_chat
from pyllama.chat.template import ChatTemplate, ChatTemplateError
from pyllama.chat.tokens import tokenize_chat

__all__ = [
    "ChatPlan",
    "ChatReader",
    "ChatTemplate",
    "ChatTemplateError",
    "ToolCall",
    "plan_chat",
    "tokenize_chat",
]
