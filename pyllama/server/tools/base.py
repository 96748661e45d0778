"""What a tool served by ``/tools`` is: built-in tools (``--tools``) and MCP tools alike.

``invoke`` is blocking and runs on a worker thread (never on the event loop), so a tool may
run processes or wait on pipes; it must not touch asyncio objects.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import Any

# params a route sets from request headers, never from the client's body
HEADER_PARAMS = {"cwd": "x-tool-cwd", "runtime": "x-tool-runtime", "resp_type": "x-resp-type"}


class ToolStream:
    """Where a streaming call (``"stream": true``) sends its chunks. ``push`` is called on
    the tool's worker thread; ``alive()`` turns false once the client has gone, and a
    long-running tool should then stop early."""

    def __init__(self, push: Callable[[str], None], stopped: threading.Event) -> None:
        self._push = push
        self._stopped = stopped

    def push(self, chunk: str) -> None:
        if chunk:
            self._push(chunk)

    def alive(self) -> bool:
        return not self._stopped.is_set()


class ToolNotFound(LookupError):
    """An unknown tool, or ``stream`` asked of a tool that cannot stream (404)."""


class Tool(abc.ABC):
    """One tool. ``invoke`` returns the JSON result; a failure the caller should see (bad
    path, non-unique edit, MCP error) is ``{"error": message}`` with status 200, as
    llama-server; an exception is a 500.

    ``params`` may carry three keys set by the route from request headers, never by the
    client's body: ``cwd`` (``X-Tool-Cwd``), ``runtime`` (``X-Tool-Runtime`` or
    ``--tools-runtime``) and ``resp_type`` (``X-Resp-Type``)."""

    name: str
    display_name: str = ""
    kind: str = "server"  # "type" in GET /tools: "server" (built-in) or "mcp"
    permission_write: bool = False
    support_stream: bool = False
    uses_cwd: bool = False

    @abc.abstractmethod
    def definition(self) -> dict[str, Any]:
        """The OpenAI function definition: ``{"type": "function", "function": {...}}``."""

    @abc.abstractmethod
    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        """Run the tool (blocking, on a worker thread)."""

    def describe(self) -> dict[str, Any]:
        """This tool's entry in ``GET /tools``."""
        return {
            "display_name": self.display_name or self.name,
            "tool": self.name,
            "type": self.kind,
            "permissions": {"write": self.permission_write},
            "uses_cwd": self.uses_cwd,
            "definition": self.definition(),
        }
