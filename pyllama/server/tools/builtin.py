"""llama-server's built-in tools (``--tools``), in upstream's order.

Upstream keeps this set minimal on purpose (file I/O and a shell, nothing higher level),
and so does this one."""

from __future__ import annotations

from pyllama.server.tools.base import Tool
from pyllama.server.tools.edit import EditFile
from pyllama.server.tools.files import ReadFile, WriteFile
from pyllama.server.tools.runtime import check_runtime
from pyllama.server.tools.search import FileGlobSearch, GrepSearch
from pyllama.server.tools.shell import ExecShellCommand, GetInfo

_TOOLS: tuple[type[Tool], ...] = (
    ReadFile,
    FileGlobSearch,
    GrepSearch,
    ExecShellCommand,
    WriteFile,
    EditFile,
    GetInfo,
)
BUILTIN_NAMES: tuple[str, ...] = tuple(t.name for t in _TOOLS)

__all__ = ["BUILTIN_NAMES", "build_builtin", "check_runtime"]


def build_builtin(enabled: list[str]) -> list[Tool]:
    """The tools named in ``enabled`` (``"all"``: every one), in upstream's order. An
    unknown name raises ``ValueError``."""
    for name in enabled:
        if name != "all" and name not in BUILTIN_NAMES:
            raise ValueError(f'unknown tool "{name}". available tools: {", ".join(BUILTIN_NAMES)}')
    wanted = set(enabled)
    return [t() for t in _TOOLS if "all" in wanted or t.name in wanted]
