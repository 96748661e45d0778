"""One model the router knows: where it comes from, its child process and its status.

A ``ModelEntry`` is created by discovery (``discovery``) or by a download
(``POST /models``) and then changed only on the router's event loop, with one exception:
a download's thread writes ``progress`` (one dict item at a time) and reads ``cancel``.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

__all__ = ["ModelEntry"]


@dataclass
class ModelEntry:
    name: str
    source: str  # "models_dir", "preset" or "cache"
    path: str | None  # GGUF file; None when no local file stands behind it (yet)
    mmproj: str | None = None  # its projector file (a --models-dir folder's, the hub's)
    args: list[str] = field(default_factory=list)  # the model's own flags (preset)
    preset: str = ""  # its INI section, as given
    aliases: list[str] = field(default_factory=list)
    hub: bool = False  # a hub-cache model (removed with pyllama.hub.remove)
    hidden: bool = False  # not listed (a preset uses the same file), still served
    missing: str = ""  # why there is no local file, for the load error
    status: str = "unloaded"  # unloaded, loading, loaded, failed, downloading, downloaded
    exit_code: int | None = None
    error: str = ""
    port: int = 0
    proc: asyncio.subprocess.Process | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False  # asked to exit; holds its slot until it has
    busy: int = 0  # requests being proxied to it
    last_used: float = 0.0
    progress: dict[str, dict[str, int]] = field(default_factory=dict)  # url -> done, total
    cancel: threading.Event = field(default_factory=threading.Event)  # stops a download
    task: asyncio.Task[None] | None = None  # the download

    def mmproj_args(self, inherited: list[str]) -> list[str]:
        """``--mmproj`` for a projector found beside the model, unless the model's flags or
        the router's name one or turn them off (--no-mmproj)."""
        given = {"-mm", "--mmproj", "--no-mmproj", "--no-mmproj-auto"}
        if self.mmproj is None or given & {*inherited, *self.args}:
            return []
        return ["--mmproj", self.mmproj]

    def projector(self) -> str | None:
        """The projector its child loads: an explicit ``--mmproj``, else the one found."""
        for i, arg in enumerate(self.args[:-1]):
            if arg in ("-mm", "--mmproj"):
                return self.args[i + 1]
        return None if "--no-mmproj" in self.args else self.mmproj

    @property
    def running(self) -> bool:
        return self.status in ("loading", "loaded")

    def same_source(self, other: ModelEntry) -> bool:
        return (self.path, self.args, self.source) == (other.path, other.args, other.source)
