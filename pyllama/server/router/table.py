"""Router mode's model table: the models the router knows (``discovery``), one
``pyllama-server`` child per loaded model, requests waiting for a ``--models-max`` slot
(``queue``), and ``POST /models`` downloads (``download``).

A child is started on a free loopback port with the router's own flags plus the model's,
always with ``--offline``, and counts as loaded once its /health says 200; on Linux it
stops when the router dies, however it dies. Status changes
and download progress go to ``/models/sse`` subscribers (``events``) with
llama-server's event names.

The router never goes to the network on its own: listing, reloading, loading and presets'
``hf-repo`` read the cache only, whatever ``--offline`` says; an explicit ``POST /models``
always fetches from the hub, as llama-server's download child does.

Everything here runs on the router's event loop; a download runs in a thread of its own
(see ``download``), children are separate processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from pyllama import hub
from pyllama.server.http.errors import APIError
from pyllama.server.router import discovery, download
from pyllama.server.router.entry import ModelEntry
from pyllama.server.router.events import Events
from pyllama.server.router.queue import LoadQueue

__all__ = ["FAKE_DELAY_S", "Events", "ModelEntry", "ModelTable"]

READY_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 10.0  # a child that ignores SIGTERM this long is killed
CHILD_PREFIX = "pyllama-server: "  # how a child's own messages start
FAKE_DELAY_S = 2.0  # LLAMA_SERVER_DEBUG_FAKE_TIMING: what llama-server's tests rely on


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Linux: a child gets SIGTERM when the router dies, even of SIGKILL, instead of living on
# as an orphan (llama-server's children watch their stdin for the same reason). A small
# exec wrapper sets it, as preexec_fn is unsafe in a process with threads; the flag
# survives the exec into the server, whose pid is the one the router started.
_DIE_WITH_ROUTER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)  # the router died before the flag was set\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _child_command(args: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pyllama.server", *args]
    if sys.platform.startswith("linux"):
        return [sys.executable, "-c", _DIE_WITH_ROUTER, str(os.getpid()), *cmd]
    return cmd


class ModelTable:
    """The router's models by name (``models``), their children, the load queue
    (``queue``), downloads and SSE events (``events``). Event-loop only."""

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
        self.verbose = verbose
        # llama-server's test hook: loads and proxied requests take 2 s longer, so that
        # tests can catch a model mid-request
        self.fake_timing = bool(os.environ.get("LLAMA_SERVER_DEBUG_FAKE_TIMING"))
        self.models: dict[str, ModelEntry] = {}
        self.events = Events()
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0))
        self.queue = LoadQueue(lambda: self.models, models_max, self._stop)
        self._merge(self._scan())

    # ------------------------------------------------------------------ discovery
    def _scan(self) -> dict[str, ModelEntry]:
        return discovery.scan(self.models_dir, self.preset_path)

    def _merge(self, found: dict[str, ModelEntry]) -> None:
        """Take a scan's result. Entries keep their identity (a request waiting on one
        still sees it); a running model keeps running; a download stays listed."""
        merged: dict[str, ModelEntry] = {}
        for name, new in found.items():
            old = self.models.get(name)
            if old is None:
                merged[name] = new
                continue
            if not (old.running or old.stopping or old.status == "downloading"):
                old.source, old.path, old.args = new.source, new.path, new.args
                old.preset, old.aliases, old.hub = new.preset, new.aliases, new.hub
                old.missing = new.missing
                old.status, old.exit_code, old.error = "unloaded", None, ""
                old.progress = {}
            old.hidden = new.hidden
            merged[name] = old
        for name, old in self.models.items():
            if name not in merged and (old.status == "downloading" or old.running):
                merged[name] = old  # a download in flight; a model being unloaded below
        self.models = merged

    async def reload(self) -> None:
        """Read the sources again (``?reload=1``, a finished download). A running model
        that is gone from its source, or whose file or flags changed, is unloaded."""
        found = self._scan()
        stale = [
            e
            for name, e in self.models.items()
            if (e.running or e.stopping) and (name not in found or not e.same_source(found[name]))
        ]
        await asyncio.gather(*(self.unload(e) for e in stale))
        self._merge(found)  # unloading changes no source: the scan above still holds
        self.events.publish("models_reload", "*")
        self.queue.notify()

    def lookup(self, name: str) -> ModelEntry | None:
        entry = self.models.get(name)
        if entry is not None:
            return entry
        for e in self.models.values():
            if name in e.aliases or (e.path and Path(e.path).name == name):
                return e
        return None

    def get(self, name: str) -> ModelEntry:
        entry = self.lookup(name)
        if entry is None:
            raise APIError(400, f"model '{name}' not found")
        return entry

    # ------------------------------------------------------------------ scheduling
    async def ensure_ready(
        self, entry: ModelEntry, should_stop: Callable[[], Awaitable[bool]]
    ) -> None:
        """Return once ``entry`` is loaded, loading it first, in turn when every slot is
        taken. ``should_stop`` (the client left) ends the wait with a 499-like error.
        Returns with nothing awaited after the check, so the caller can mark the model
        busy before anything else runs."""
        if entry.status == "loaded" and not entry.stopping:
            return
        if entry.status in ("downloading", "downloaded"):
            raise APIError(400, f"model '{entry.name}' is downloading")
        queued = False
        if entry.status in ("unloaded", "failed"):
            self.queue.join(entry.name)
            queued = True
            self.queue.tick()
        did_load = saw_loading = False
        try:
            while True:
                if self.models.get(entry.name) is not entry:
                    raise APIError(400, f"model '{entry.name}' not found")
                if entry.stopping:  # the next instance serves this request
                    if not queued:
                        self.queue.join(entry.name)
                        queued = True
                        self.queue.tick()
                    if await should_stop():
                        raise APIError(400, "request cancelled while waiting for the model")
                    await self.queue.wait_change()
                    continue
                status = entry.status
                if status == "loaded":
                    break
                if status == "loading":
                    saw_loading = True
                elif status in ("unloaded", "failed"):
                    if did_load or saw_loading:
                        if status == "failed":
                            raise APIError(
                                500, f"model '{entry.name}' failed to load: {entry.error}"
                            )
                        raise APIError(400, f"model name={entry.name} is not running")
                    if not queued:
                        raise APIError(400, f"model name={entry.name} is not running")
                if await should_stop():
                    raise APIError(400, "request cancelled while waiting for the model")
                if status in ("unloaded", "failed") and self.queue.try_claim(entry.name):
                    try:
                        if self.fake_timing:
                            await asyncio.sleep(FAKE_DELAY_S)
                        did_load = self._spawn(entry)
                    except APIError:
                        pass  # lost the slot to someone else: stay in line
                    self.queue.claim_done(entry.name, did_load)
                    if not did_load and entry.status == "failed":  # nothing to start
                        raise APIError(500, f"model '{entry.name}' failed to load: {entry.error}")
                    self.queue.tick()
                    continue
                await self.queue.wait_change()
        except BaseException:
            if queued:
                self.queue.leave(entry.name)
            self.queue.tick()  # a slot freed for this request goes to the next one
            raise
        if queued:
            self.queue.leave(entry.name)

    def release(self, entry: ModelEntry) -> None:
        """A proxied request ended."""
        entry.busy -= 1
        if entry.busy == 0:
            self.queue.tick()
            self.queue.notify()

    # ----------------------------------------------------------------- processes
    async def load(self, entry: ModelEntry) -> None:
        """``/models/load``: start the model's child, stopping the least recently used idle
        model first when every slot is taken (returns at once; ``wait_ready`` waits)."""
        if self.fake_timing:
            await asyncio.sleep(FAKE_DELAY_S)
        if entry.running:
            return
        if not self.queue.has_capacity():
            victim = self.queue.victim()
            if victim is not None:
                await self.unload(victim)
        if entry.running:
            return
        self._spawn(entry)

    def _spawn(self, entry: ModelEntry) -> bool:
        """Start the child (False: there is no file to start it on, ``entry`` failed)."""
        if not self.queue.has_capacity():
            raise APIError(503, "model limit reached, try again later")
        if entry.path is None:
            entry.status, entry.exit_code = "failed", 1
            entry.error = "no local GGUF file for this model" + (
                f" ({entry.missing})" if entry.missing else ""
            )
            entry.ready.set()  # waiters see the failure at once
            self.queue.notify()
            return False
        entry.port = _free_port()
        cmd = _child_command(
            [
                *self.child_args,
                *entry.args,
                *entry.mmproj_args(self.child_args),
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
        )
        entry.ready = asyncio.Event()
        entry.status, entry.exit_code, entry.error = "loading", None, ""
        entry.stopping = False
        entry.last_used = time.monotonic()
        self.events.publish("model_status", entry.name, {"status": "loading"})
        asyncio.get_running_loop().create_task(self._run(entry, cmd))
        return True

    async def _run(self, entry: ModelEntry, cmd: list[str]) -> None:
        """Start the child, mark it loaded when /health says so, and record its end."""
        out = None if self.verbose else asyncio.subprocess.DEVNULL
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd, stdout=out, stderr=asyncio.subprocess.PIPE, limit=1 << 20
            )
        except OSError as e:
            self._ended(entry, None, 1, f"could not start the model's server: {e}")
            return
        entry.proc = proc
        assert proc.stderr is not None
        said = asyncio.get_running_loop().create_task(self._child_errors(proc.stderr))
        if entry.stopping:  # unloaded while it was being started
            self._terminate(entry)
        url = f"http://127.0.0.1:{entry.port}/health"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while proc.returncode is None and entry.proc is proc and not entry.stopping:
            with contextlib.suppress(httpx.TransportError):
                if (await self.client.get(url, timeout=2.0)).status_code == 200:
                    entry.status = "loaded"
                    entry.ready.set()
                    self.events.publish("status_change", entry.name, {"status": "loaded"})
                    self.queue.tick()  # a model that comes up idle may be what a queue waits for
                    self.queue.notify()
                    break
            if time.monotonic() > deadline:
                entry.error = f"not ready after {READY_TIMEOUT_S:.0f} s"
                proc.kill()
                break
            await asyncio.sleep(0.1)
        code = await proc.wait()
        self._ended(entry, proc, code, await said)

    async def _child_errors(self, stderr: asyncio.StreamReader) -> str:
        """Drain a child's stderr (echoed with -v) until it closes; return the last line
        the child said about itself ("pyllama-server: cannot load model ..."), which
        becomes the model's load error."""
        last = ""
        async for raw in stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if self.verbose:
                print(line, file=sys.stderr, flush=True)
            at = line.find(CHILD_PREFIX)  # after a --log-prefix letter or timestamp
            if at >= 0:
                last = line[at + len(CHILD_PREFIX) :]
        return last

    def _ended(
        self, entry: ModelEntry, proc: asyncio.subprocess.Process | None, code: int, why: str
    ) -> None:
        if entry.proc is not proc:
            return  # a newer instance took the entry over
        entry.proc = None
        if entry.stopping:
            entry.status, entry.exit_code = "unloaded", None
        else:  # died on its own
            entry.status, entry.exit_code = "failed", code
            entry.error = why or entry.error or f"the model's server exited with code {code}"
        entry.stopping = False
        entry.ready.set()
        data: dict[str, Any] = {"status": "unloaded", "exit_code": entry.exit_code or 0}
        self.events.publish("status_change", entry.name, data)
        self.queue.tick()
        self.queue.notify()

    def _terminate(self, entry: ModelEntry) -> None:
        proc = entry.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()

        async def reap() -> None:
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()

        asyncio.get_running_loop().create_task(reap())

    def _stop(self, entry: ModelEntry) -> None:
        """Ask a running child to exit; it holds its slot until it has."""
        if not entry.running or entry.stopping:
            return
        entry.stopping = True
        self._terminate(entry)  # a child still starting is stopped once it has a pid
        self.queue.notify()

    async def wait_ready(self, entry: ModelEntry) -> None:
        await entry.ready.wait()
        if entry.status != "loaded":
            raise APIError(500, f"model '{entry.name}' failed to load: {entry.error}")

    async def unload(self, entry: ModelEntry) -> None:
        """Stop a model (or cancel its download) and wait until it is gone."""
        if entry.status == "downloading":
            entry.cancel.set()
            if entry.task is not None:
                await asyncio.wait({entry.task})
            return
        self._stop(entry)
        while entry.running:
            await self.queue.wait_change()

    # ----------------------------------------------------------------- downloads
    def start_download(self, name: str) -> None:
        """``POST /models``: fetch a hub model in the background (``download_*`` events),
        from the hub even under ``--offline``, as llama-server. A download takes no
        ``--models-max`` slot."""
        try:
            hub.split_repo_tag(name)
        except ValueError as e:
            raise APIError(400, str(e)) from e
        if self.lookup(name) is not None:
            raise APIError(400, f"model '{name}' already exists")
        entry = ModelEntry(name, "cache", None, hub=True, status="downloading")
        self.models[name] = entry
        self.events.publish("model_status", name, {"status": "downloading"})
        entry.task = asyncio.get_running_loop().create_task(self._download(entry))

    async def _download(self, entry: ModelEntry) -> None:
        def publish() -> None:
            progress = dict(entry.progress)  # one C-level copy: the thread adds keys
            self.events.publish("download_progress", entry.name, {"progress": progress})

        error = await download.fetch(entry, publish)
        if error is None:
            entry.status = "downloaded"  # the scan replaces it with the model itself
            await self.reload()
            self.events.publish("download_finished", entry.name)
        else:
            if self.models.get(entry.name) is entry:
                del self.models[entry.name]
            message = str(error) if isinstance(error, (hub.HubError, OSError)) else repr(error)
            self.events.publish("download_failed", entry.name, {"error": message})
        self.queue.notify()

    async def remove(self, entry: ModelEntry) -> None:
        """``DELETE /models``: unload a cache model (or cancel its download) and delete its
        files from the cache."""
        downloading = entry.status == "downloading"
        if downloading or entry.running:
            await self.unload(entry)
        # a cancelled download named without a tag keeps the repository's other models
        # (llama-server would delete the whole repository here)
        if entry.hub and not (downloading and ":" not in entry.name):
            with contextlib.suppress(ValueError):  # the name was checked when listed
                hub.remove(entry.name)
        elif entry.path is not None:
            Path(entry.path).unlink(missing_ok=True)
        if self.models.get(entry.name) is entry:
            del self.models[entry.name]
        self._merge(self._scan())
        self.events.publish("model_remove", entry.name)
        self.queue.notify()

    async def close(self) -> None:
        for entry in self.models.values():
            entry.cancel.set()
        running = [e for e in self.models.values() if e.running]
        await asyncio.gather(*(self.unload(e) for e in running), return_exceptions=True)
        tasks = [e.task for e in self.models.values() if e.task is not None and not e.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        self.events.close()
        await self.client.aclose()
