"""Renders of an untrusted template bounded in time and memory (RELIABILITY 18-19).

llama.cpp's Jinja engine has no bound of its own: a template that loops for ever or builds a
huge string would hold its thread, or the whole process's memory. ``BoundedRenders`` runs
``ChatTemplates.chat_params`` in worker processes, each holding the same template (the
model's vocabulary loaded alone, for its BOS/EOS texts and tool-use variant) under an
address-space limit; a render past ``max_seconds`` kills its worker (a fresh one replaces
it), and one that runs out of its memory fails there. The request gets a 400 naming the
bound; other requests, on the other workers, do not notice. Processes, limits and their
absence (Windows: renders stay in-process, unbounded) are this module's concern alone.
"""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import threading
from typing import Any

__all__ = ["BoundedRenders", "bounds_renders"]

MAX_SECONDS = 1.0  # real templates render in milliseconds
MAX_BYTES = 2 << 30  # a worker's address space beyond what it holds at start


def bounds_renders() -> bool:
    """Whether renders can be bounded here: worker processes with an address-space limit
    (POSIX; on Windows they stay in-process)."""
    return os.name == "posix"


def _serve(marker: str, model_path: str, source: str, options: dict[str, Any]) -> None:
    """The worker's loop: one JSON request line in, one JSON answer line out."""
    import resource

    # the parent's media marker (llama-server's, random per process): the renders here
    # must write the marker the parent's projector looks for
    os.environ["LLAMA_MEDIA_MARKER"] = marker
    from pyllama import _core

    model = _core.Model(model_path, vocab_only=True) if model_path else None
    templates = _core.ChatTemplates(model, source, **options)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        held = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = held + MAX_BYTES
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))

    def send(kind: str, text: str) -> None:
        sys.stdout.write(json.dumps([kind, text]) + "\n")
        sys.stdout.flush()

    send("ready", "")
    for line in sys.stdin:  # ends when the parent's end of the pipe closes
        try:
            send("ok", templates.chat_params(json.loads(line)))
        except MemoryError:
            send("memory", "")
        except ValueError as e:
            send("value", str(e))
        except RuntimeError as e:  # std::bad_alloc may arrive as a RuntimeError
            send("memory" if "bad_alloc" in str(e) or "bad alloc" in str(e) else "runtime", str(e))


class _Worker:
    """One render process: a plain child (no multiprocessing: its resource tracker would
    inherit the server's stderr, which a router watches to learn that its child died),
    its stderr discarded, requests and answers as JSON lines over its stdin and stdout."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        # the parent's own pyllama first on the child's path: ``-c`` puts the working
        # directory there, and a source checkout in it (no compiled _core) would shadow
        # the installed package
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import sys, json; sys.path.insert(0, sys.argv[1]); "
             "from pyllama.chat.bounded import _serve; _serve(*json.loads(sys.argv[2]))",
             here, json.dumps(list(args))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, close_fds=True,
        )  # fmt: skip

    def answer(self, timeout: float) -> tuple[str, str] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError("the render worker ended")
        kind, text = json.loads(line)
        return kind, text

    def wait_ready(self) -> None:
        try:
            got = self.answer(120)
        except EOFError:
            got = None
        if got is None or got[0] != "ready":
            self.close()
            raise RuntimeError(
                f"the chat template's render worker did not start ({sys.executable} "
                "could not import pyllama or load the model's vocabulary)"
            )

    def send(self, body: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(body) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class BoundedRenders:
    """``params(body_json) -> str`` as ``_core.ChatTemplates.chat_params``, bounded.
    ValueError / RuntimeError as the in-process call raises them; TimeoutError and
    MemoryError for a render past a bound."""

    def __init__(
        self, model_path: str, source: str, options: dict[str, Any], workers: int = 2
    ) -> None:
        from pyllama import _core

        self._args = (_core.chat_media_marker(), model_path, source, options)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._all: list[_Worker] = []
        started = [_Worker(self._args) for _ in range(workers)]  # start together
        try:
            for w in started:
                w.wait_ready()
        except BaseException:
            for w in started:
                w.close()
            raise
        self._all.extend(started)
        for w in started:
            self._idle.put(w)

    def _add(self) -> None:
        w = _Worker(self._args)
        w.wait_ready()
        with self._lock:
            self._all.append(w)
        self._idle.put(w)

    def _drop(self, w: _Worker) -> None:
        w.close()
        with self._lock:
            self._all.remove(w)

    def params(self, body: str, max_seconds: float = MAX_SECONDS) -> str:
        w = self._idle.get()
        try:
            w.send(body)
            got = w.answer(max_seconds)
            kind, text = got if got is not None else ("timeout", "")
        except (OSError, EOFError, ValueError):
            kind, text = "memory", ""  # the worker died (killed by the kernel at its limit)
        if kind in ("timeout", "memory"):
            self._drop(w)
            self._add()
            if kind == "timeout":
                raise TimeoutError(f"chat template render took longer than {max_seconds:g} s")
            raise MemoryError("chat template render exceeds its memory bound")
        self._idle.put(w)
        if kind == "value":
            raise ValueError(text)
        if kind == "runtime":
            raise RuntimeError(text)
        return text

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for w in workers:
            w.close()
