"""A chat request planned for the server: the protocol-neutral fields as an OpenAI chat
body, through the one chat path (``pyllama.chat.plan_chat``, llama.cpp's chat layer) with
the server's template and flags; what llama-server refuses is a 400 in the protocol's
envelope. Shared by every protocol that speaks chat (OpenAI chat, Anthropic, Responses,
Ollama) and /apply-template."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyllama.chat import ChatPlan, ChatReader, ChatTemplateError, ToolCall
from pyllama.chat import plan_chat as plan_body
from pyllama.server.http.errors import APIError
from pyllama.server.state import ServerState

__all__ = ["ChatPlan", "ChatReader", "ToolCall", "plan_chat"]

# OpenAI's roles; llama.cpp renders any string, but a role the API does not know is the
# client's mistake (RELIABILITY: a 400 naming it, where llama-server answers 200)
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _check_roles(messages: Any) -> None:
    for i, m in enumerate(messages if isinstance(messages, list) else []):
        role = m.get("role") if isinstance(m, Mapping) else None
        if isinstance(role, str) and role not in ROLES:
            raise APIError(400, f"messages[{i}]: role '{role}' is not one of {', '.join(ROLES)}")


def plan_chat(
    state: ServerState,
    messages: Any,
    *,
    tools: Any = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    reasoning_format: str | None = None,
    add_generation_prompt: bool = True,
    template_kwargs: Mapping[str, Any] | None = None,
    grammar: str | None = None,
    json_schema: Any = None,
    response_format: Mapping[str, Any] | None = None,
    continue_final: bool | str | None = None,
    media: bool = False,
) -> ChatPlan:
    """Render and tokenize a chat as llama-server does; APIError(400) for bad messages or
    tools or a template that refuses them (llama-server: 400, or 500 for the template's
    own raise_exception, which is the request's fault here too). With ``media`` (marker
    parts in the messages) the tokens are left to the projector (``turn.plan_call``)."""
    model, _ = state.require()
    assert state.chat is not None
    _check_roles(messages)
    body: dict[str, Any] = {"messages": messages}
    for key, value in (
        ("tools", tools),
        ("tool_choice", tool_choice),
        ("parallel_tool_calls", parallel_tool_calls),
        ("reasoning_format", reasoning_format),
        ("chat_template_kwargs", dict(template_kwargs) if template_kwargs else None),
        ("grammar", grammar),
        ("json_schema", json_schema),
        ("response_format", dict(response_format) if response_format else None),
        ("continue_final_message", continue_final),
    ):
        if value is not None:
            body[key] = value
    if not add_generation_prompt:
        body["add_generation_prompt"] = False
    try:
        return plan_body(state.chat, model, body, media=media)
    except ChatTemplateError as e:
        raise APIError(400, str(e)) from e
    except RuntimeError as e:
        raise APIError(500, str(e), "server_error") from e
