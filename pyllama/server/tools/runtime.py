"""``--tools-runtime``: the isolate every tool call runs through unless ``X-Tool-Runtime``
names another. ``<engine>:<image>`` spawns a container owned by the server (stopped and
removed at exit); anything else names an existing target and is only validated."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
import threading
import time

from pyllama.server.tools.isolate import ToolRuntimeError, make_io, parse_container_spec

log = logging.getLogger(__name__)

SPAWN_WAIT_S = 10.0  # for the engine to write the new container's id


def check_runtime(spec: str) -> None:
    """Reject a bad ``--tools-runtime`` spec at startup (``ValueError``); spawns nothing."""
    container = parse_container_spec(spec)
    if container is not None and not container.attach:
        if not container.arg:
            raise ValueError(f"--tools-runtime {container.bin}:<image> requires an image name")
        return
    try:
        make_io({"runtime": spec})
    except ToolRuntimeError as e:
        raise ValueError(str(e)) from None


class ToolsRuntime:
    """A runtime that needs no lifecycle: the validated spec is passed straight through."""

    def __init__(self, spec: str) -> None:
        check_runtime(spec)
        self._spec = spec

    def spec(self) -> str:
        """The ``runtime`` param for one tool call."""
        return self._spec

    def close(self) -> None:
        pass


class ContainerRuntime(ToolsRuntime):
    """Owns ``<engine> run --rm -i <image> sh``: the shell blocks on its open stdin, so the
    container lives until ``close()`` closes it (then ``--rm`` removes it)."""

    def __init__(self, spec: str) -> None:
        check_runtime(spec)
        parsed = parse_container_spec(spec)
        if parsed is None or parsed.attach:
            raise ValueError(f"unknown --tools-runtime option: {spec}")
        self.bin, self.image = parsed.bin, parsed.arg
        self.container_id = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._spawn()

    def _spawn(self) -> None:
        self._stop_proc()
        with tempfile.TemporaryDirectory(prefix="pyllama-tools-runtime-") as tmp:
            cidfile = os.path.join(tmp, "cid")  # the engine refuses a cidfile that exists
            argv = [self.bin, "run", "--rm", "-i", "--cidfile", cidfile, self.image, "sh"]
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            except OSError as e:
                raise RuntimeError(
                    f"failed to spawn {self.bin} container for tools runtime (image: {self.image})"
                ) from e
            cid = ""
            deadline = time.monotonic() + SPAWN_WAIT_S
            while not cid and time.monotonic() < deadline and self._proc.poll() is None:
                with contextlib.suppress(OSError), open(cidfile) as f:
                    cid = f.readline().strip()
                if not cid:
                    time.sleep(0.1)
        if not cid:
            self._stop_proc(kill=True)
            raise RuntimeError(
                f"timed out waiting for {self.bin} container to start (image: {self.image})"
            )
        self.container_id = cid

    def _stop_proc(self, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        elif proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # the container's shell (its pid 1) reads EOF and exits
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def spec(self) -> str:
        # a container that died on its own is respawned, so the spec names a running one
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                log.warning(
                    "%s tools runtime container %r died, respawning", self.bin, self.container_id
                )
                self._spawn()
            return f"{self.bin}-container:{self.container_id}"

    def close(self) -> None:
        with self._lock:
            self._stop_proc()


def make_runtime(spec: str) -> ToolsRuntime:
    """The runtime for ``--tools-runtime``; raises ``ValueError`` for a bad spec and
    ``RuntimeError`` when its container cannot be started. Call ``close()`` at exit."""
    container = parse_container_spec(spec)
    if container is not None and not container.attach:
        return ContainerRuntime(spec)
    return ToolsRuntime(spec)
