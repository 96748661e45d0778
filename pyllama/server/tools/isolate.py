"""Tool I/O inside an isolate named by ``X-Tool-Runtime`` (or ``--tools-runtime``):
``docker-container:<id>``, ``podman-container:<id>`` (a running container, through
``<engine> exec``) or ``ssh:<target>`` (a remote host; remoting, not isolation).

Every operation is a command run in the isolate, which must provide a POSIX environment
(sh, cat, wc, mkdir, dirname, find, timeout). The header's text only ever lands in argv
lists, after a check that it cannot be read as an option; paths travel as ``"$1"`` of a
fixed ``sh -c`` script, never spliced into it."""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyllama.server.tools.localio import (
    ALL,
    DIRS,
    FILES,
    GIT_LS_FILES_MAX_OUTPUT,
    JUNK_DIR_NAMES,
    READ_FILE_MAX_SIZE,
    ListEntry,
    ListResult,
    LocalIO,
    ToolsIO,
    entry_depth,
)
from pyllama.server.tools.proc import ExecResult, run_subprocess

AUX_TIMEOUT = 15  # seconds, for the helper commands (stat, mkdir, ls); run() has its own
CONTAINER_ENGINES = ("docker", "podman")

# first char alphanumeric: an id such as "--privileged" would become an engine option
_CONTAINER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# ssh reads options from its argv: "-oProxyCommand=..." would run on this host
_SSH_TARGET = re.compile(r"[A-Za-z0-9._@][A-Za-z0-9._@-]*")


class ToolRuntimeError(RuntimeError):
    """A bad runtime spec: the call fails (500), it never falls back to the host."""


@dataclass
class ContainerSpec:
    bin: str
    arg: str  # the image when spawning, the container id when attaching
    attach: bool


def parse_container_spec(spec: str) -> ContainerSpec | None:
    """``<engine>:<image>`` (spawn) or ``<engine>-container:<id>`` (attach), else None."""
    for engine in CONTAINER_ENGINES:
        if spec.startswith(engine + "-container:"):
            return ContainerSpec(engine, spec[len(engine) + len("-container:") :], True)
        if spec.startswith(engine + ":"):
            return ContainerSpec(engine, spec[len(engine) + 1 :], False)
    return None


def is_valid_container_id(cid: str) -> bool:
    return _CONTAINER_ID.fullmatch(cid) is not None


def is_valid_ssh_target(target: str) -> bool:
    return _SSH_TARGET.fullmatch(target) is not None


def shell_quote_join(argv: Sequence[str]) -> str:
    """One string that a POSIX shell parses back into exactly ``argv``."""
    return " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)


def _split_lines(text: bytes, strip_dot_slash: bool) -> list[str]:
    out = []
    for line in text.decode("utf-8", "replace").split("\n"):
        line = line.rstrip("\r")
        if not line:
            continue
        if strip_dot_slash and line.startswith("./"):
            line = line[2:]
        out.append(line.replace("\\", "/"))
    return out


class IsolateIO(ToolsIO):
    """Runs every operation as a command in the isolate; ``build_argv`` wraps a POSIX
    argv into the host-side command that runs it there."""

    def __init__(self, cwd: str = "") -> None:
        self.cwd = cwd

    @abc.abstractmethod
    def build_argv(self, inner: list[str], needs_stdin: bool) -> list[str]:
        """``inner`` (a complete POSIX argv) as the host-side argv that runs it."""

    def resolve(self, path: str) -> str:
        # isolate paths are always POSIX
        if not self.cwd or path.startswith("/"):
            return path
        return f"{self.cwd}/{path}"

    def _exec(self, inner: list[str], max_output: int, combine_stderr: bool = True) -> ExecResult:
        return run_subprocess(
            self.build_argv(inner, False), max_output, AUX_TIMEOUT, combine_stderr=combine_stderr
        )

    def _ok(self, inner: list[str]) -> bool:
        res = self._exec(inner, 4096)
        return res.exit_code == 0 and not res.timed_out

    def is_directory(self, path: str) -> bool:
        return self._ok(["sh", "-c", '[ -d "$1" ]', "_", self.resolve(path)])

    def is_regular_file(self, path: str) -> bool:
        return self._ok(["sh", "-c", '[ -f "$1" ]', "_", self.resolve(path)])

    def file_size(self, path: str) -> int | None:
        res = self._exec(["sh", "-c", 'wc -c < "$1"', "_", self.resolve(path)], 64)
        m = re.match(rb"\s*(\d+)", res.output)
        if res.exit_code != 0 or res.timed_out or m is None:
            return None
        return int(m.group(1))

    def read_file(self, path: str) -> bytes | None:
        # stderr must not be spliced into the file's bytes; a file cut short is refused,
        # else edit_file would write the cut (and its marker) back
        res = self._exec(["cat", "--", self.resolve(path)], READ_FILE_MAX_SIZE, False)
        if res.exit_code != 0 or res.timed_out or res.truncated:
            return None
        return res.output

    def write_file(self, path: str, content: bytes) -> bool:
        # the content travels on stdin: no argv for the far side to re-parse
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        argv = self.build_argv(["sh", "-c", script, "_", self.resolve(path)], True)
        res = run_subprocess(argv, 4096, AUX_TIMEOUT, stdin_data=content)
        return res.exit_code == 0 and not res.timed_out

    def list_entries(self, base: str, max_depth: int, kind: str) -> ListResult:
        out = ListResult()
        abs_base = self.resolve(base)
        if not self.is_directory(base):
            out.err = "path does not exist or is not a directory"
            return out
        if kind == FILES:
            script = 'cd "$1" && git ls-files --cached --others --exclude-standard'
            res = self._exec(["sh", "-c", script, "_", abs_base], GIT_LS_FILES_MAX_OUTPUT)
            if res.exit_code == 0 and not res.timed_out:
                for rel in _split_lines(res.output, False):
                    if max_depth <= 0 or entry_depth(rel) <= max_depth:
                        out.entries.append(ListEntry(rel))
                return out
        if kind in (DIRS, ALL):
            out.entries += [ListEntry(r, True) for r in self._find(abs_base, max_depth, True, out)]
        if kind in (FILES, ALL):
            out.entries += [ListEntry(r) for r in self._find(abs_base, max_depth, False, out)]
        return out

    def _find(self, abs_base: str, max_depth: int, dirs: bool, out: ListResult) -> list[str]:
        # junk directories are printed but never descended into; -mindepth/-maxdepth keep
        # busybox find working as well as GNU find
        prune = " -o ".join(f"-name {n}" for n in JUNK_DIR_NAMES)
        cmd = 'cd "$1" && find . -mindepth 1'
        if max_depth > 0:
            cmd += f" -maxdepth {int(max_depth)}"
        cmd += f" \\( {prune} \\) -prune"
        cmd += " -print -o -type d -print" if dirs else " -o -type f -print"
        res = self._exec(["sh", "-c", cmd, "_", abs_base], GIT_LS_FILES_MAX_OUTPUT)
        out.truncated = out.truncated or res.timed_out
        return _split_lines(res.output, True)

    def run(
        self,
        args: list[str],
        max_output: int,
        timeout_s: int,
        on_chunk: Callable[[str], bool] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> ExecResult:
        # killing the host-side client does not kill what runs inside the isolate, so the
        # command carries its own `timeout`; the host's deadline is a little later
        inner = ["timeout", f"{timeout_s}s", *args]
        if self.cwd:
            # no `-w` on every transport: the command changes directory itself (127: the
            # shell's code for a command it could not run)
            script = 'cd "$1" || exit 127; shift; exec "$@"'
            inner = ["sh", "-c", script, "_", self.cwd, *inner]
        return run_subprocess(
            self.build_argv(inner, True),
            max_output,
            timeout_s + 5,
            on_chunk,
            should_stop=should_stop,
        )


class ContainerIO(IsolateIO):
    """A running container, through ``<engine> exec`` (docker and podman alike)."""

    def __init__(self, bin: str, container_id: str, cwd: str = "") -> None:
        super().__init__(cwd)
        self.bin = bin
        self.container_id = container_id

    def build_argv(self, inner: list[str], needs_stdin: bool) -> list[str]:
        return [self.bin, "exec", *(["-i"] if needs_stdin else []), self.container_id, *inner]


class SshIO(IsolateIO):
    """A remote host over ssh: the tools can do anything the target account can do."""

    # no console here, so a prompt would hang the call: key-based auth only, and the
    # host key must be trusted beforehand
    SSH_ARGV = (
        "ssh",
        "-o", "BatchMode=yes",
        "-o", "PasswordAuthentication=no",
        "-o", "KbdInteractiveAuthentication=no",
        "-o", "StrictHostKeyChecking=yes",
    )  # fmt: skip

    def __init__(self, target: str, cwd: str = "") -> None:
        super().__init__(cwd)
        self.target = target

    def build_argv(self, inner: list[str], needs_stdin: bool) -> list[str]:
        # the remote shell re-parses the command line, so `inner` travels as one quoted word
        argv = list(self.SSH_ARGV)
        if not needs_stdin:
            argv.append("-n")
        return [*argv, self.target, shell_quote_join(inner)]


def make_io(params: dict[str, Any]) -> ToolsIO:
    """The IO a tool call runs through: the host, unless ``params["runtime"]`` names an
    isolate. A bad runtime raises ``ToolRuntimeError``, never falls back to the host."""
    cwd = params.get("cwd")
    cwd = cwd if isinstance(cwd, str) else ""
    runtime = params.get("runtime")
    if not isinstance(runtime, str) or not runtime:
        return LocalIO(cwd)
    container = parse_container_spec(runtime)
    if container is not None:
        # spawning belongs to the --tools-runtime owner; a tool call only attaches
        if not container.attach:
            raise ToolRuntimeError(f"tool runtime must name a running container: {runtime}")
        if not is_valid_container_id(container.arg):
            raise ToolRuntimeError(f"invalid container id: {container.arg}")
        return ContainerIO(container.bin, container.arg, cwd)
    if runtime.startswith("ssh:"):
        target = runtime[len("ssh:") :]
        if not is_valid_ssh_target(target):
            raise ToolRuntimeError(f"invalid ssh target: {target}")
        return SshIO(target, cwd)
    raise ToolRuntimeError(f"unknown tool runtime: {runtime}")
