"""Generated text back to an assistant message, as it streams: reasoning split from the
content, tool calls parsed out of it, each piece an OpenAI-style message delta."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyllama.reasoning import ReasoningStream
from pyllama.toolcalls import ToolCall, ToolStream

if TYPE_CHECKING:
    from pyllama.server.pipeline.plan import ChatPlan

__all__ = ["ChatDeltas"]


class ChatDeltas:
    """Streamed text in, OpenAI-style message deltas out (reasoning_content, content,
    tool_calls), each a dict ready for a chunk's ``delta``."""

    def __init__(self, plan: ChatPlan) -> None:
        inline = plan.reasoning == "none"
        self.reasoning = None if inline else ReasoningStream(plan.opened)
        # left in the content, a reply the prompt opened starts with the prompt's tag
        self.prefix = plan.opened if inline else ""
        self.tools = ToolStream(plan.tools) if plan.tools is not None else None
        self.n_calls = 0

    def _out(self, reasoning: str, content: str, final: bool) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if reasoning:
            out.append({"reasoning_content": reasoning})
        calls: list[ToolCall] = []
        if self.tools is not None:
            text, calls = self.tools.feed(content) if content else ("", [])
            if final:
                rest, more = self.tools.finish()
                text, calls = text + rest, calls + more
            content = text
        if content:
            out.append({"content": content})
        for c in calls:
            out.append({"tool_calls": [c.to_openai(self.n_calls)]})
            self.n_calls += 1
        return out

    def feed(self, text: str) -> list[dict[str, Any]]:
        if self.reasoning is None:
            text, self.prefix = self.prefix + text, ""
            return self._out("", text, False)
        r, c = self.reasoning.feed(text)
        return self._out(r, c, False)

    def finish(self) -> list[dict[str, Any]]:
        if self.reasoning is None:
            text, self.prefix = self.prefix, ""  # a reply of no text still has the tag
            return self._out("", text, True)
        r, c = self.reasoning.finish()
        return self._out(r, c, True)
