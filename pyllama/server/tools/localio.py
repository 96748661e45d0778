"""Where a built-in tool's file and process operations happen: ``ToolsIO``, and
``LocalIO``, which runs them on this host (an isolate is in ``isolate.py``)."""

from __future__ import annotations

import abc
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyllama.server.tools.proc import ExecResult, run_subprocess

GIT_LS_FILES_MAX_OUTPUT = 8 * 1024 * 1024
LIST_ENTRIES_TIMEOUT = 15  # seconds, for one listing (git and walker together)
# the most a tool reads of one file (an isolate's `cat` is cut at the same size)
READ_FILE_MAX_SIZE = 64 * 1024 * 1024

# directories a listing reports but never descends into: they can be enormous
JUNK_DIR_NAMES = (
    ".git", ".svn", ".hg", "node_modules", "__pycache__",
    ".venv", "venv", "dist", "build", "target", ".cache", ".idea", ".vscode",
)  # fmt: skip

# which entries a listing returns
FILES, DIRS, ALL = "files", "dirs", "all"


@dataclass
class ListEntry:
    rel: str  # '/'-separated, relative to the listed base
    is_dir: bool = False


@dataclass
class ListResult:
    entries: list[ListEntry] = field(default_factory=list)
    err: str = ""  # set when the base is not a directory
    truncated: bool = False  # the walk could not see everything


def entry_depth(rel: str) -> int:
    return 1 + rel.count("/")


class ToolsIO(abc.ABC):
    """The operations the built-in tools need, on the host or inside an isolate."""

    @abc.abstractmethod
    def resolve(self, path: str) -> str:
        """``path`` against the IO's working directory; an absolute path is kept."""

    @abc.abstractmethod
    def is_directory(self, path: str) -> bool: ...

    @abc.abstractmethod
    def is_regular_file(self, path: str) -> bool: ...

    @abc.abstractmethod
    def file_size(self, path: str) -> int | None:
        """The size of a regular file, None when it cannot be stat'ed."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes | None: ...

    @abc.abstractmethod
    def write_file(self, path: str, content: bytes) -> bool: ...

    @abc.abstractmethod
    def list_entries(self, base: str, max_depth: int, kind: str) -> ListResult:
        """Entries under the resolved ``base``; ``max_depth`` 0 is unlimited, 1 is the
        direct children only."""

    @abc.abstractmethod
    def run(
        self,
        args: list[str],
        max_output: int,
        timeout_s: int,
        on_chunk: Callable[[str], bool] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> ExecResult: ...


def _expand_home(path: str) -> str:
    if not path.startswith("~") or (len(path) > 1 and path[1] not in "/\\"):
        return path
    home = os.environ.get("HOME") or os.environ.get("USERPROFILE") or ""
    return home + path[1:] if home else path


def _to_slashes(path: str) -> str:
    return path.replace(os.sep, "/") if os.sep != "/" else path


class LocalIO(ToolsIO):
    """The host's filesystem; ``cwd`` (the ``X-Tool-Cwd`` header) resolves relative
    paths and is the working directory of ``run``."""

    def __init__(self, cwd: str = "") -> None:
        self.cwd = cwd

    def resolve(self, path: str) -> str:
        p = _expand_home(path)
        if not os.path.isabs(p):
            p = os.path.join(self.cwd or os.getcwd(), p)
        # "." and ".." never reach git or the client
        return _to_slashes(os.path.normpath(p))

    def is_directory(self, path: str) -> bool:
        return os.path.isdir(self.resolve(path))

    def is_regular_file(self, path: str) -> bool:
        return os.path.isfile(self.resolve(path))

    def file_size(self, path: str) -> int | None:
        try:
            st = os.stat(self.resolve(path))
        except (OSError, ValueError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def read_file(self, path: str) -> bytes | None:
        try:
            with open(self.resolve(path), "rb") as f:
                data = f.read(READ_FILE_MAX_SIZE + 1)
        except (OSError, ValueError):
            return None
        # a larger file is refused rather than cut: edit_file would write the cut back
        return data if len(data) <= READ_FILE_MAX_SIZE else None

    def write_file(self, path: str, content: bytes) -> bool:
        full = self.resolve(path)
        try:
            parent = os.path.dirname(full)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(full, "wb") as f:
                f.write(content)
        except (OSError, ValueError):
            return False
        return True

    def run(
        self,
        args: list[str],
        max_output: int,
        timeout_s: int,
        on_chunk: Callable[[str], bool] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> ExecResult:
        return run_subprocess(
            args, max_output, timeout_s, on_chunk, cwd=self.cwd, should_stop=should_stop
        )

    def list_entries(self, base: str, max_depth: int, kind: str) -> ListResult:
        out = ListResult()
        if not os.path.isdir(base):
            out.err = "path does not exist or is not a directory"
            return out
        deadline = time.monotonic() + LIST_ENTRIES_TIMEOUT

        # git honours .gitignore but cannot list directories
        if kind == FILES:
            res = self.run(
                ["git", "-C", base, "ls-files", "--cached", "--others", "--exclude-standard"],
                GIT_LS_FILES_MAX_OUTPUT,
                LIST_ENTRIES_TIMEOUT,
            )
            if res.exit_code == 0 and not res.timed_out:
                for line in res.output.decode("utf-8", "replace").split("\n"):
                    rel = line.rstrip("\r").replace("\\", "/")
                    if not rel or (max_depth > 0 and entry_depth(rel) > max_depth):
                        continue
                    if os.path.isfile(os.path.join(base, rel)):
                        out.entries.append(ListEntry(rel))
                return out

        out.entries = self._walk(base, max_depth, kind, deadline, out)
        return out

    @staticmethod
    def _walk(
        base: str, max_depth: int, kind: str, deadline: float, out: ListResult
    ) -> list[ListEntry]:
        result: list[ListEntry] = []
        stack: list[tuple[str, str, int]] = [(base, "", 0)]
        while stack:
            if time.monotonic() >= deadline:
                out.truncated = True
                return result
            path, rel_dir, depth = stack.pop()
            try:
                with os.scandir(path) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except PermissionError:
                continue  # a directory we may not read is skipped silently, as upstream
            except OSError:
                out.truncated = True
                continue
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                try:
                    is_dir = entry.is_dir()  # follows links, like the file check below
                    is_file = not is_dir and entry.is_file()
                    is_link = entry.is_symlink()
                except OSError:
                    continue
                if is_dir:
                    if kind in (DIRS, ALL):
                        result.append(ListEntry(rel, True))
                    # a junk directory stays selectable but is never walked; a link could
                    # point back to an ancestor, so it is never walked either
                    name = entry.name.lower() if os.name == "nt" else entry.name
                    if name in JUNK_DIR_NAMES or is_link:
                        continue
                    if max_depth == 0 or depth + 1 < max_depth:
                        stack.append((entry.path, rel, depth + 1))
                elif is_file and kind in (FILES, ALL):
                    result.append(ListEntry(rel))
        return result
