"""Router mode's model table: which models exist, and one ``pyllama-server`` child per
loaded model.

Models come from ``--models-dir`` (a ``.gguf`` file, or a sub-directory holding one, as
llama-server scans it), from a ``--models-preset`` INI file (one section per model; keys are
llama-server's long flags without dashes, ``model`` is the GGUF path, ``[*]`` applies to
all) and from pyllama's model cache. A child is started on demand on a free loopback port
with the router's own flags plus the model's, and counts as loaded once its /health says
200. At most ``--models-max`` children run; loading one more stops the least recently used
child that serves no request.

Everything here runs on the router's event loop; children are separate processes.
"""

from __future__ import annotations

import asyncio
import configparser
import contextlib
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from pyllama.server.errors import APIError

__all__ = ["ModelEntry", "ModelTable"]

READY_TIMEOUT_S = 600.0


@dataclass
class ModelEntry:
    name: str
    source: str  # "models_dir", "preset" or "cache"
    path: str | None  # GGUF file; None when the preset names something else (a hub repo)
    args: list[str] = field(default_factory=list)  # the model's own flags (preset)
    preset: str = ""  # its INI section, as given
    aliases: list[str] = field(default_factory=list)
    status: str = "unloaded"  # unloaded, loading, loaded, failed
    exit_code: int | None = None
    error: str = ""
    port: int = 0
    proc: asyncio.subprocess.Process | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    busy: int = 0  # requests being proxied to it
    last_used: float = 0.0

    @property
    def running(self) -> bool:
        return self.status in ("loading", "loaded")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scan_dir(root: Path) -> list[ModelEntry]:
    if not root.is_dir():
        raise APIError(400, f"--models-dir '{root}' does not exist or is not a directory")
    out = []
    for item in sorted(root.iterdir()):
        if item.is_dir():
            ggufs = sorted(p for p in item.glob("*.gguf") if "mmproj" not in p.name)
            shard = [p for p in ggufs if "-00001-of-" in p.name]
            if ggufs:
                out.append(ModelEntry(item.name, "models_dir", str((shard or ggufs)[0])))
        elif item.suffix == ".gguf" and "mmproj" not in item.name:
            out.append(ModelEntry(item.stem, "models_dir", str(item)))
    return out


def _preset_args(section: configparser.SectionProxy) -> tuple[str | None, list[str]]:
    path = None
    args: list[str] = []
    for key, value in section.items():
        if key in ("model", "m"):
            path = value
            continue
        if key in ("alias", "a"):  # names for the router to match, not a child flag
            continue
        value = value.strip()
        flag = "--" + key.replace("_", "-")
        if value.lower() in ("true", "on", "1", ""):
            args.append(flag)
        elif value.lower() in ("false", "off", "0"):
            continue
        else:
            args += [flag, value]
    return path, args


def _scan_preset(path: Path) -> list[ModelEntry]:
    ini = configparser.ConfigParser(default_section="*", interpolation=None)
    ini.optionxform = str.lower  # type: ignore[assignment,method-assign]
    try:
        ini.read_string(path.read_text())
    except (OSError, configparser.Error) as e:
        raise APIError(400, f"--models-preset '{path}': {e}") from e
    out = []
    for name in ini.sections():
        section = ini[name]
        model, args = _preset_args(section)
        text = f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in section.items())
        local = model if model and Path(model).is_file() else None
        aliases = [a.strip() for a in section.get("alias", "").split(",") if a.strip()]
        out.append(ModelEntry(name, "preset", local, args=args, preset=text, aliases=aliases))
    return out


def _scan_cache() -> list[ModelEntry]:
    from pyllama.models import cache_dir

    root = cache_dir() / "models"
    if not root.is_dir():
        return []
    return [ModelEntry(p.stem, "cache", str(p)) for p in sorted(root.glob("*.gguf"))]


class ModelTable:
    def __init__(
        self,
        child_args: list[str],
        models_dir: str | None,
        preset: str | None,
        models_max: int,
        verbose: bool = False,
    ) -> None:
        self.child_args = child_args  # the router's flags that children inherit
        self.models_dir = models_dir
        self.preset_path = preset
        self.models_max = models_max
        self.verbose = verbose
        self.models: dict[str, ModelEntry] = {}
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0))
        self._lock = asyncio.Lock()
        self.reload()

    # ------------------------------------------------------------------ discovery
    def reload(self) -> None:
        """(Re)read the sources; running children of models that are still listed stay."""
        found: dict[str, ModelEntry] = {}
        for entry in _scan_cache():
            found[entry.name] = entry
        if self.models_dir:
            for entry in _scan_dir(Path(self.models_dir)):
                found[entry.name] = entry
        if self.preset_path:
            for entry in _scan_preset(Path(self.preset_path)):
                found[entry.name] = entry
        for name, old in self.models.items():
            if name in found and old.running:
                found[name] = old
            elif old.running:
                self._kill(old)
        self.models = found

    def get(self, name: str) -> ModelEntry:
        entry = self.models.get(name)
        if entry is None:
            for e in self.models.values():
                if name in e.aliases or (e.path and Path(e.path).name == name):
                    return e
            raise APIError(400, f"model '{name}' not found")
        return entry

    # ----------------------------------------------------------------- processes
    async def load(self, entry: ModelEntry) -> None:
        """Start the model's child (returns at once; ``wait_ready`` waits for it)."""
        async with self._lock:
            if entry.running:
                return
            if entry.path is None:
                entry.status, entry.error = "failed", "no local GGUF file for this model"
                entry.exit_code = 1
                entry.ready.set()  # waiters see the failure at once
                return
            await self._make_room()
            entry.port = _free_port()
            cmd = [
                sys.executable,
                "-m",
                "pyllama.server",
                *self.child_args,
                *entry.args,
                "-m",
                entry.path,
                "-a",
                entry.name,
                "--host",
                "127.0.0.1",
                "--port",
                str(entry.port),
                "--offline",
            ]
            out = None if self.verbose else asyncio.subprocess.DEVNULL
            entry.ready = asyncio.Event()
            entry.status, entry.exit_code, entry.error = "loading", None, ""
            entry.last_used = time.monotonic()
            entry.proc = await asyncio.create_subprocess_exec(*cmd, stdout=out, stderr=out)
            asyncio.get_running_loop().create_task(self._watch(entry, entry.proc))

    async def _watch(self, entry: ModelEntry, proc: asyncio.subprocess.Process) -> None:
        url = f"http://127.0.0.1:{entry.port}/health"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while proc.returncode is None and entry.proc is proc and entry.status == "loading":
            with contextlib.suppress(httpx.TransportError):
                if (await self.client.get(url, timeout=2.0)).status_code == 200:
                    entry.status = "loaded"
                    entry.ready.set()
                    break
            if time.monotonic() > deadline:
                self._kill(entry)
                break
            await asyncio.sleep(0.1)
        code = await proc.wait()
        if entry.proc is proc:  # died on its own (an unload has already reset the entry)
            entry.proc = None
            entry.status, entry.exit_code = "failed", code
            entry.error = f"the model's server exited with code {code}"
            entry.ready.set()

    async def wait_ready(self, entry: ModelEntry) -> None:
        await entry.ready.wait()
        if entry.status != "loaded":
            raise APIError(500, f"model '{entry.name}' failed to load: {entry.error}")

    def _kill(self, entry: ModelEntry) -> None:
        proc, entry.proc = entry.proc, None
        entry.status = "unloaded"
        entry.ready.set()
        if proc is not None and proc.returncode is None:
            proc.terminate()

    async def unload(self, entry: ModelEntry) -> None:
        proc = entry.proc
        self._kill(entry)
        if proc is not None:
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except asyncio.TimeoutError:
                proc.kill()

    async def _make_room(self) -> None:
        if self.models_max <= 0:
            return
        running = [e for e in self.models.values() if e.running]
        while len(running) >= self.models_max:
            idle = [e for e in running if e.busy == 0]
            if not idle:
                raise APIError(503, "every loaded model is busy; try again later")
            victim = min(idle, key=lambda e: e.last_used)
            await self.unload(victim)
            running.remove(victim)

    async def close(self) -> None:
        for entry in self.models.values():
            if entry.running:
                await self.unload(entry)
        await self.client.aclose()
