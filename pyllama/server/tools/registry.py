"""The tools a server offers on ``/tools``: the built-in ones ``--tools`` enables, then
each MCP server's tools as ``<server>_<tool>`` (a name already taken is skipped)."""

from __future__ import annotations

import logging
from typing import Any

from pyllama.server.tools.base import HEADER_PARAMS, Tool, ToolNotFound, ToolStream
from pyllama.server.tools.builtin import build_builtin
from pyllama.server.tools.mcp.client import McpManager, McpToolDef
from pyllama.server.tools.mcp.config import load_mcp_configs
from pyllama.server.tools.runtime import ToolsRuntime, make_runtime

__all__ = ["McpTool", "ToolBox"]

log = logging.getLogger("pyllama.server.tools")


class McpTool(Tool):
    kind = "mcp"

    def __init__(self, spec: McpToolDef, manager: McpManager) -> None:
        self.spec = spec
        self.manager = manager
        self.name = self.display_name = f"{spec.server}_{spec.name}"

    def definition(self) -> dict[str, Any]:
        schema = self.spec.input_schema if isinstance(self.spec.input_schema, dict) else {}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.spec.description,
                "parameters": schema,
            },
        }

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        # the header-derived keys are for built-in tools; an MCP server gets the client's own
        args = {k: v for k, v in params.items() if k not in HEADER_PARAMS}
        stop = (lambda: not stream.alive()) if stream is not None else None
        return self.manager.call_tool(self.spec.server, self.spec.name, args, stop)


class ToolBox:
    def __init__(
        self, tools: list[Tool], mcp: McpManager | None = None, runtime: ToolsRuntime | None = None
    ) -> None:
        self.tools = tools
        self.mcp = mcp
        self.runtime = runtime  # --tools-runtime: every call's default isolate

    @classmethod
    def from_flags(
        cls,
        enabled: list[str],
        runtime: str = "",
        mcp_config: str | None = None,
        mcp_json: str | None = None,
    ) -> ToolBox | None:
        """None when neither tools nor MCP servers are asked for. Raises ``ValueError``
        for an unknown tool name, a bad runtime or a bad MCP config; spawns each MCP server
        once to list its tools (blocking)."""
        tools: list[Tool] = build_builtin(enabled) if enabled else []
        configs = load_mcp_configs(mcp_config, mcp_json)
        if not tools and not configs:
            return None
        isolate = None
        if runtime:
            try:
                isolate = make_runtime(runtime)  # docker:<image> starts its container now
            except RuntimeError as e:
                raise ValueError(f"--tools-runtime: {e}") from None
        mcp = None
        if configs:
            mcp = McpManager(configs)
            mcp.warm_up()
            taken = {t.name for t in tools}
            for spec in mcp.tools:
                tool = McpTool(spec, mcp)
                if tool.name in taken:
                    log.warning("MCP tool %r collides with an existing tool, skipping", tool.name)
                    continue
                taken.add(tool.name)
                tools.append(tool)
        return cls(tools, mcp, isolate)

    def find(self, name: str, stream: bool) -> Tool:
        for tool in self.tools:
            if tool.name == name:
                if stream and not tool.support_stream:
                    raise ToolNotFound(f'tool "{name}" does not support stream = true')
                return tool
        raise ToolNotFound(f'unknown tool "{name}"')

    def describe(self) -> list[dict[str, Any]]:
        return [t.describe() for t in self.tools]

    def shutdown(self) -> None:
        """Fast and idempotent: in-flight MCP calls return now."""
        if self.mcp is not None:
            self.mcp.shutdown()

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()
        if self.runtime is not None:
            self.runtime.close()
