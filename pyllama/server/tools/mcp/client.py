"""MCP servers over stdio: a child process speaking newline-delimited JSON-RPC 2.0.

Each configured server is spawned once at start-up to list its tools, then stopped, and
spawned again on demand when one of its tools is called (respawned if it died, with a
cooldown after a failed spawn). Everything here is blocking and runs on worker threads;
one lock per server is held across a call's reply wait, so calls to one server queue up
while other servers stay free.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from pyllama.server.tools.mcp.config import McpServerConfig
from pyllama.server.tools.proc import taskkill_tree

__all__ = ["McpManager", "McpStdio", "McpToolDef"]

log = logging.getLogger("pyllama.server.mcp")

PROTOCOL_VERSION = "2024-11-05"
MAX_LINE = 8 << 20  # a longer line (a child that never writes "\n") is dropped
POLL_S = 0.05  # reader and waits re-check their stop conditions this often
COOLDOWN_S = 5.0  # after a failed spawn, calls fail fast this long
WARMUP_S = 10.0  # tool discovery per server at start-up
PEEK_S = 0.005  # Windows: how often an idle pipe is peeked at within POLL_S

Stop = Callable[[], bool]


if sys.platform == "win32":
    import _winapi  # CPython's own Win32 calls (multiprocessing peeks at pipes with it)
    import msvcrt

    def _readable(fd: int, timeout: float) -> bool:
        """Whether reading ``fd`` returns at once, waiting up to ``timeout`` s. Windows'
        select() takes sockets only: the pipe is peeked at instead."""
        handle = msvcrt.get_osfhandle(fd)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if _winapi.PeekNamedPipe(handle, 0)[0]:
                    return True
            except BrokenPipeError:
                return True  # the writer is gone: the read sees EOF
            if time.monotonic() >= deadline:
                return False
            time.sleep(PEEK_S)

else:

    def _readable(fd: int, timeout: float) -> bool:
        """Whether reading ``fd`` returns at once, waiting up to ``timeout`` s."""
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)


@dataclass(frozen=True)
class McpToolDef:
    server: str
    name: str  # bare, without the "<server>_" prefix
    description: str
    input_schema: Any


def _rpc_error(reply: dict[str, Any]) -> str:
    err = reply.get("error")
    if isinstance(err, dict):
        return str(err.get("message", "unknown error"))
    return err if isinstance(err, str) else "unknown error"


def _result_to_response(result: Any) -> dict[str, Any]:
    """A ``tools/call`` result in the /tools shape: the text parts joined, or an error."""
    texts = []
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        texts = [
            str(p.get("text", ""))
            for p in result["content"]
            if isinstance(p, dict) and p.get("type") == "text"
        ]
    text = "\n".join(texts)
    if isinstance(result, dict) and result.get("isError"):
        return {"error": text or "MCP tool returned an error"}
    return {"plain_text_response": text}


class McpStdio:
    """One session with one MCP server process."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self._proc: subprocess.Popen[bytes] | None = None
        self._frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._running = threading.Event()
        self._threads: list[threading.Thread] = []
        self._rpc = threading.Lock()  # held across a request and its reply
        self._next_id = 1
        self._initialized = False
        self._tools: list[McpToolDef] | None = None
        self.last_error = ""
        self._err_tail = b""

    # -- process ---------------------------------------------------------------------

    def start(self) -> bool:
        cfg = self.config
        command, flags = cfg.command, 0
        if sys.platform == "win32":
            # as llama-server there: "npx" is npx.cmd, found through PATHEXT (CreateProcess
            # tries .exe only); no console window for the child
            command = shutil.which(command) or command
            flags = subprocess.CREATE_NO_WINDOW
        try:
            self._proc = subprocess.Popen(
                [command, *cfg.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cfg.cwd or None,
                env={**os.environ, **cfg.env},
                start_new_session=True,  # its own process group: close() kills grandchildren too
                creationflags=flags,
            )
        except OSError as e:
            self.last_error = f"failed to spawn {cfg.command!r}: {e.strerror or e}"
            return False
        self._running.set()
        assert self._proc.stdout is not None and self._proc.stderr is not None
        for target, pipe in (
            (self._read_stdout, self._proc.stdout),
            (self._read_stderr, self._proc.stderr),
        ):
            t = threading.Thread(target=target, args=(pipe.fileno(),), daemon=True)
            t.start()
            self._threads.append(t)
        return True

    def is_alive(self) -> bool:
        return self._running.is_set() and self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """Kill the process (group) and join the pumps. Idempotent; never waits on a pipe
        that a surviving grandchild could hold open: the pumps poll ``_running``."""
        self._running.clear()
        proc = self._proc
        if proc is None:
            return
        if os.name == "posix":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        else:  # no process groups: kill the tree by parent ids, then the child itself
            taskkill_tree(proc.pid)
            with contextlib.suppress(OSError):
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
        for t in self._threads:
            t.join(timeout=1)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._frames.put(None)

    def diagnostics(self) -> str:
        tail = self._err_tail.decode("utf-8", "replace").strip()
        return f"{self.last_error} {tail[-500:]}".strip()

    def _pump(self, fd: int, on_line: Callable[[bytes], None]) -> None:
        buf = b""
        skipping = False  # inside an over-long line: drop bytes up to its newline
        while self._running.is_set():
            try:
                if not _readable(fd, POLL_S):
                    continue
                chunk = os.read(fd, 65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break  # EOF
            buf += chunk
            if skipping:
                nl = buf.find(b"\n")
                if nl < 0:
                    buf = b""
                    continue
                buf, skipping = buf[nl + 1 :], False
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line := line.rstrip(b"\r"):
                    on_line(line)
            if len(buf) > MAX_LINE:
                log.warning("MCP %r: dropping a line over %d bytes", self.config.name, MAX_LINE)
                buf, skipping = b"", True

    def _read_stdout(self, fd: int) -> None:
        self._pump(fd, self._frames.put)
        self._running.clear()  # EOF or error: the session is over
        self._frames.put(None)

    def _read_stderr(self, fd: int) -> None:
        def keep(line: bytes) -> None:
            log.debug("MCP %r: %s", self.config.name, line.decode("utf-8", "replace"))
            self._err_tail = (self._err_tail + line + b"\n")[-4096:]

        self._pump(fd, keep)

    # -- JSON-RPC --------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None or not self.is_alive():
            return False
        try:
            proc.stdin.write(orjson.dumps(message) + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def _request(self, method: str, params: dict[str, Any] | None, stop: Stop) -> dict[str, Any]:
        """Send one request and wait for the reply with its id, skipping notifications and
        late replies to earlier timed-out requests. Caller holds ``_rpc``."""
        req_id = self._next_id
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            message["params"] = params
        if not self._send(message):
            return {"error": {"code": -32603, "message": "transport closed"}}
        deadline = time.monotonic() + self.config.timeout_ms / 1000
        while True:
            if stop():
                return {"error": {"code": -32603, "message": "cancelled"}}
            if time.monotonic() >= deadline:
                return {"error": {"code": -32603, "message": "request timed out"}}
            try:
                frame = self._frames.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if frame is None:  # the reader ended
                if self.is_alive():
                    continue
                return {"error": {"code": -32603, "message": "transport closed"}}
            try:
                reply = orjson.loads(frame)
            except orjson.JSONDecodeError:
                continue  # not JSON: skipped
            if isinstance(reply, dict) and reply.get("id") == req_id:
                return reply

    def _ensure_init(self, stop: Stop) -> bool:
        if self._initialized:
            return True
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "pyllama", "version": "1.0"},
        }
        reply = self._request("initialize", params, stop)
        if "result" not in reply:
            self.last_error = "initialize failed: " + _rpc_error(reply)
            return False
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._initialized = True
        return True

    def list_tools(self, stop: Stop) -> list[McpToolDef]:
        with self._rpc:
            if not self._ensure_init(stop):
                return []
            if self._tools is None:
                reply = self._request("tools/list", None, stop)
                if "result" not in reply:
                    self.last_error = "tools/list failed: " + _rpc_error(reply)
                    return []
                listed = reply["result"].get("tools") if isinstance(reply["result"], dict) else None
                self._tools = [
                    McpToolDef(
                        self.config.name,
                        str(t.get("name", "")),
                        str(t.get("description", "")),
                        t.get("inputSchema"),
                    )
                    for t in (listed if isinstance(listed, list) else [])
                    if isinstance(t, dict)
                ]
            return list(self._tools)

    def call_tool(self, name: str, arguments: dict[str, Any], stop: Stop) -> dict[str, Any]:
        with self._rpc:
            if not self._ensure_init(stop):
                return {"error": self.last_error}
            reply = self._request("tools/call", {"name": name, "arguments": arguments}, stop)
        if "error" in reply:
            return {"error": _rpc_error(reply)}
        if "result" in reply:
            return _result_to_response(reply["result"])
        return {"error": "invalid response from MCP server"}


class McpManager:
    """The configured servers: their tools (found at start-up) and live sessions."""

    def __init__(self, configs: list[McpServerConfig]) -> None:
        self.configs = {c.name: c for c in configs}
        self.tools: list[McpToolDef] = []
        self._lock = threading.Lock()  # guards _live and _dead, never held across I/O
        self._live: dict[str, McpStdio] = {}
        self._dead: dict[str, float] = {}  # name -> end of its spawn-failure cooldown
        self._stopping = threading.Event()

    def warm_up(self) -> None:
        """Spawn each server, list its tools, stop it. A server that fails is logged and
        contributes no tools; the others still do."""
        found: list[McpToolDef] = []
        for cfg in self.configs.values():
            session = McpStdio(cfg)
            if not session.start():
                log.warning("MCP warmup: failed to spawn %r: %s", cfg.name, session.diagnostics())
                continue
            deadline = time.monotonic() + WARMUP_S
            try:
                tools = session.list_tools(
                    lambda d=deadline: self._stopping.is_set() or time.monotonic() >= d
                )
            finally:
                session.close()
            if not tools and session.last_error:
                log.warning("MCP warmup: %r: %s", cfg.name, session.diagnostics())
            log.info("MCP warmup: %r discovered %d tools", cfg.name, len(tools))
            found += tools
        self.tools = found

    def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], stop: Stop | None = None
    ) -> dict[str, Any]:
        session = self._session(server)
        if session is None:
            return {"error": f"MCP server unavailable: {server}"}
        return session.call_tool(
            tool, arguments, lambda: self._stopping.is_set() or (stop is not None and stop())
        )

    def shutdown(self) -> None:
        """Make in-flight calls return at once (within one poll). Call before the HTTP
        server drains its connections; ``close`` then reaps the processes."""
        self._stopping.set()

    def close(self) -> None:
        self.shutdown()
        with self._lock:
            sessions, self._live = list(self._live.values()), {}
        for s in sessions:
            s.close()

    def _session(self, name: str) -> McpStdio | None:
        stale = None
        with self._lock:
            if self._stopping.is_set():
                return None
            now = time.monotonic()
            if self._dead.get(name, 0.0) > now:
                return None
            self._dead.pop(name, None)
            live = self._live.get(name)
            if live is not None and live.is_alive():
                return live
            if live is not None:
                log.warning("MCP %r is no longer alive: %s", name, live.diagnostics())
                stale = self._live.pop(name)
            cfg = self.configs.get(name)
            fresh = None
            if cfg is not None:
                fresh = McpStdio(cfg)
                if fresh.start():
                    self._live[name] = fresh
                else:
                    log.warning("MCP %r: failed to start: %s", name, fresh.diagnostics())
                    self._dead[name] = now + COOLDOWN_S
                    fresh = None
        if stale is not None:
            stale.close()
        return fresh
