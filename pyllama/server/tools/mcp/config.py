"""MCP server definitions: the Cursor-compatible ``{"mcpServers": {name: {...}}}`` JSON of
``--mcp-servers-config`` (a file) and ``--mcp-servers-json`` (inline)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["McpServerConfig", "load_mcp_configs", "parse_mcp_json"]

log = logging.getLogger("pyllama.server.mcp")


@dataclass(frozen=True)
class McpServerConfig:
    name: str  # the config key; tools are exposed as "<name>_<tool>"
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # merged over the server's environment
    cwd: str | None = None
    timeout_ms: int = 30000  # per call


def parse_mcp_json(text: str) -> list[McpServerConfig]:
    """Raises ``ValueError`` for text that is not JSON or has wrongly typed fields. A
    missing ``mcpServers`` gives no servers; an entry without ``command`` is skipped."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"failed to parse MCP config JSON: {e}") from None
    servers = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(servers, dict):
        return []
    out = []
    for name, cfg in servers.items():
        if not isinstance(cfg, dict):
            raise ValueError(f"MCP server {name!r}: expected an object")
        command = cfg.get("command") or ""
        if not command:
            log.warning("MCP server %r has no command, skipping", name)
            continue
        out.append(
            McpServerConfig(
                name=name,
                command=_typed(name, "command", command, str),
                args=tuple(_typed(name, "args", a, str) for a in _list(name, cfg.get("args"))),
                env={
                    k: _typed(name, "env", v, str) for k, v in _dict(name, cfg.get("env")).items()
                },
                cwd=_typed(name, "cwd", cfg.get("cwd"), str) if cfg.get("cwd") else None,
                timeout_ms=_typed(name, "timeout_ms", cfg.get("timeout_ms", 30000), int),
            )
        )
    return out


def load_mcp_configs(path: str | None, inline: str | None) -> list[McpServerConfig]:
    """Both sources, file first; a name already defined is skipped. Raises ``ValueError``
    for an unreadable file or bad JSON, naming the flag that gave it (the server then
    refuses to start)."""
    texts: list[tuple[str, str]] = []
    if path:
        try:
            texts.append(("--mcp-servers-config", Path(path).read_text(encoding="utf-8")))
        except OSError as e:
            raise ValueError(
                f"--mcp-servers-config: failed to open MCP config file: {path}: {e.strerror}"
            ) from None
    if inline:
        texts.append(("--mcp-servers-json", inline))
    configs: dict[str, McpServerConfig] = {}
    for flag, text in texts:
        try:
            parsed = parse_mcp_json(text)
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None
        if not parsed:
            log.warning("MCP config: no servers found in JSON")
        for cfg in parsed:
            if cfg.name in configs:
                log.warning("MCP config: duplicate server name %r, skipping", cfg.name)
                continue
            configs[cfg.name] = cfg
    return list(configs.values())


def _typed(server: str, key: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"MCP server {server!r}: {key} must be a {kind.__name__}")
    return value


def _list(server: str, value: Any) -> list[Any]:
    if value is None:
        return []
    return _typed(server, "args", value, list)


def _dict(server: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    return _typed(server, "env", value, dict)
