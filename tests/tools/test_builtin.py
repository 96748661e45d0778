"""llama-server's built-in tools (``--tools``), called directly: a real filesystem under
tmp_path and real subprocesses. The HTTP side (``POST /tools``) is upstream's
test_tools_builtin.py, run against pyllama-server by ci/peer_tests.sh."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pyllama.server.tools.base import Tool, ToolStream
from pyllama.server.tools.builtin import BUILTIN_NAMES, build_builtin, check_runtime
from pyllama.server.tools.globmatch import glob_match, path_glob_match
from pyllama.server.tools.isolate import (
    ContainerIO,
    IsolateIO,
    SshIO,
    ToolRuntimeError,
    make_io,
    shell_quote_join,
)
from pyllama.server.tools.localio import DIRS, FILES
from pyllama.server.tools.params import ToolParamError
from pyllama.server.tools.proc import run_subprocess

TOOLS = {t.name: t for t in build_builtin(["all"])}


def call(name: str, **params: Any) -> dict[str, Any]:
    res = TOOLS[name].invoke(params)
    assert "error" not in res, res
    return res


def error(name: str, **params: Any) -> str:
    res = TOOLS[name].invoke(params)
    assert set(res) == {"error"}, res
    return res["error"]


def stream_call(
    tool: Tool, params: dict[str, Any], stop_after: int | None = None
) -> tuple[list[str], dict[str, Any]]:
    """Chunks pushed and the result; the client 'leaves' after ``stop_after`` chunks."""
    chunks: list[str] = []
    stopped = threading.Event()

    def push(chunk: str) -> None:
        chunks.append(chunk)
        if stop_after is not None and len(chunks) >= stop_after:
            stopped.set()

    return chunks, tool.invoke(params, ToolStream(push, stopped))


# registry


def test_names_order_and_flags():
    assert BUILTIN_NAMES == (
        "read_file",
        "file_glob_search",
        "grep_search",
        "exec_shell_command",
        "write_file",
        "edit_file",
        "get_info",
    )
    writers = {n for n, t in TOOLS.items() if t.permission_write}
    assert writers == {"exec_shell_command", "write_file", "edit_file"}
    assert [n for n, t in TOOLS.items() if t.support_stream] == ["exec_shell_command"]
    assert all(t.uses_cwd and t.kind == "server" for t in TOOLS.values())


def test_build_subset_keeps_upstream_order():
    assert [t.name for t in build_builtin(["get_info", "read_file"])] == ["read_file", "get_info"]
    assert build_builtin([]) == []


def test_build_unknown_name():
    with pytest.raises(ValueError) as e:
        build_builtin(["read_file", "web_search"])
    assert str(e.value) == (
        'unknown tool "web_search". available tools: read_file, file_glob_search, '
        "grep_search, exec_shell_command, write_file, edit_file, get_info"
    )


def test_describe():
    d = TOOLS["exec_shell_command"].describe()
    assert d["display_name"] == "Execute shell command" and d["tool"] == "exec_shell_command"
    assert d["type"] == "server" and d["permissions"] == {"write": True} and d["uses_cwd"]
    fn = d["definition"]["function"]
    assert d["definition"]["type"] == "function" and fn["name"] == "exec_shell_command"
    assert fn["parameters"]["required"] == ["command"]
    assert "max 60" in fn["parameters"]["properties"]["timeout"]["description"]
    info = TOOLS["get_info"].definition()["function"]["parameters"]
    assert info == {"type": "object", "properties": {}}


def test_missing_required_param():
    with pytest.raises(ToolParamError, match="key 'path' not found"):
        TOOLS["read_file"].invoke({})
    with pytest.raises(ToolParamError, match="type must be string"):
        TOOLS["write_file"].invoke({"path": "x", "content": 3})


# read_file


def test_read_file(tmp_path: Path):
    f = tmp_path / "a.txt"
    f.write_text("one\ntwo\nthree")  # no final newline: the last line still counts
    assert call("read_file", path=str(f))["plain_text_response"] == "one\ntwo\nthree\n"
    res = call("read_file", path=str(f), start_line=2, end_line=2, append_loc=True)
    assert res["plain_text_response"] == "2\u2192two\n"
    res = call("read_file", path=str(f), start_line=2)
    assert res["plain_text_response"] == "two\nthree\n"


def test_read_file_errors(tmp_path: Path):
    assert error("read_file", path=str(tmp_path / "nope")) == f"cannot stat file: {tmp_path}/nope"
    assert error("read_file", path=str(tmp_path)).startswith("cannot stat file")


def test_read_file_size_limits(tmp_path: Path):
    f = tmp_path / "big.txt"
    f.write_text("".join(f"line {i:05d}\n" for i in range(2000)))  # 22000 bytes
    assert error("read_file", path=str(f)) == (
        "file too large (22000 bytes, max 16384). Use start_line/end_line to read a portion."
    )
    text = call("read_file", path=str(f), end_line=3)["plain_text_response"]
    assert text == "line 00000\nline 00001\nline 00002\n"
    text = call("read_file", path=str(f), end_line=2000)["plain_text_response"]
    assert text.endswith("line 01488\n[output truncated]")  # whole lines up to 16 KiB


def test_read_file_base64(tmp_path: Path):
    f = tmp_path / "bin"
    f.write_bytes(b"\x00\xff\x10 raw")
    res = call("read_file", path=str(f), resp_type="base64")
    assert res == {"base64": base64.b64encode(b"\x00\xff\x10 raw").decode(), "size_bytes": 7}


def test_read_file_relative_to_cwd_and_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r.txt").write_text("rel")
    res = call("read_file", path="sub/../sub/r.txt", cwd=str(tmp_path))
    assert res["plain_text_response"] == "rel\n"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert call("read_file", path="~/sub/r.txt")["plain_text_response"] == "rel\n"


# write_file


def test_write_file(tmp_path: Path):
    res = call("write_file", path="deep/er/out.txt", content="h\u00e9llo\n", cwd=str(tmp_path))
    assert res == {"result": "file written successfully", "path": "deep/er/out.txt", "bytes": 7}
    assert (tmp_path / "deep" / "er" / "out.txt").read_text() == "h\u00e9llo\n"


def test_write_file_error(tmp_path: Path):
    assert error("write_file", path=str(tmp_path), content="x") == (
        f"failed to write file: {tmp_path}"
    )


# edit_file


def test_edit_file(tmp_path: Path):
    f = tmp_path / "e.txt"
    f.write_text("line1\nline2\nline3\n")
    res = call(
        "edit_file",
        path=str(f),
        edits=[
            {"old_text": "line2", "new_text": "line2-edited"},
            {"old_text": "line3\n", "new_text": "line3\nline4\n"},
        ],
    )
    assert res == {"result": "file edited successfully", "path": str(f), "edits_applied": 2}
    assert f.read_text() == "line1\nline2-edited\nline3\nline4\n"


@pytest.mark.parametrize(
    ("content", "edits", "message"),
    [
        ("dup\ndup\n", [{"old_text": "dup", "new_text": "x"}], "found 2 occurrences of edits[0]"),
        (
            "line1\nline2\n",
            [{"old_text": "line1\nline2", "new_text": "a"}, {"old_text": "line2", "new_text": "b"}],
            "edits[0] and edits[1] overlap in",
        ),
        ("abc\n", [{"old_text": "zzz", "new_text": "x"}], "could not find edits[0].old_text"),
        ("abc\n", [{"old_text": "", "new_text": "x"}], "edits[0].old_text must not be empty"),
        ("abc\n", [], '"edits" must be a non-empty array'),
        ("abc\n", [{"old_text": "b", "new_text": "b"}], "no changes made"),
    ],
)
def test_edit_file_errors(tmp_path: Path, content: str, edits: list, message: str):
    f = tmp_path / "e.txt"
    f.write_text(content)
    assert message in error("edit_file", path=str(f), edits=edits)
    assert f.read_text() == content


def test_edit_file_missing(tmp_path: Path):
    err = error("edit_file", path=str(tmp_path / "no"), edits=[{"old_text": "a", "new_text": "b"}])
    assert err == f"failed to open file: {tmp_path}/no"


def test_edit_file_fuzzy_match_keeps_untouched_lines(tmp_path: Path):
    # the model writes plain quotes and drops trailing blanks; the file has neither
    f = tmp_path / "q.py"
    f.write_text("keep = \u201cme\u201d  \nsay(\u201chi\u201d)   \ntail\u00a0\n")
    res = call("edit_file", path=str(f), edits=[{"old_text": 'say("hi")', "new_text": "say(1)"}])
    assert res["edits_applied"] == 1
    assert f.read_text() == "keep = \u201cme\u201d  \nsay(1)\ntail\u00a0\n"


def test_edit_file_keeps_non_utf8_bytes(tmp_path: Path):
    f = tmp_path / "b.txt"
    f.write_bytes(b"\xff\xfe head\nold\n")
    call("edit_file", path=str(f), edits=[{"old_text": "old", "new_text": "new"}])
    assert f.read_bytes() == b"\xff\xfe head\nnew\n"


# file_glob_search


def make_tree(root: Path) -> None:
    (root / "project-alpha" / "src").mkdir(parents=True)
    (root / "project-alpha" / "README.md").write_text("alpha")
    (root / "project-alpha" / "src" / "main.cpp").write_text("int main() {}")
    (root / "project-beta").mkdir()
    (root / "project-beta" / "notes.txt").write_text("beta")
    (root / "build" / "nested").mkdir(parents=True)
    (root / "build" / "artifact.txt").write_text("built")


def test_glob_files_dirs_all(tmp_path: Path):
    make_tree(tmp_path)
    res = call("file_glob_search", path=str(tmp_path))
    assert sorted(e["path"] for e in res["entries"]) == [
        "project-alpha/README.md",
        "project-alpha/src/main.cpp",
        "project-beta/notes.txt",
    ]
    assert res["base"] == str(tmp_path)
    assert "Total matches: 3" in res["plain_text_response"]

    res = call("file_glob_search", path=str(tmp_path), type="dir")
    types = {e["path"]: e["type"] for e in res["entries"]}
    # a junk directory is listed but not walked
    assert types == {
        "build": "dir",
        "project-alpha": "dir",
        "project-alpha/src": "dir",
        "project-beta": "dir",
    }
    assert "project-alpha/src/\n" in res["plain_text_response"]

    res = call("file_glob_search", path=str(tmp_path), type="all", include="*proj*")
    assert sorted(e["path"] for e in res["entries"]) == ["project-alpha", "project-beta"]


def test_glob_include_exclude_depth_limit(tmp_path: Path):
    make_tree(tmp_path)
    res = call("file_glob_search", path=str(tmp_path), include="src/*.cpp")
    assert [e["path"] for e in res["entries"]] == ["project-alpha/src/main.cpp"]
    res = call("file_glob_search", path=str(tmp_path), exclude="*.md")
    assert "README.md" not in res["plain_text_response"]
    res = call("file_glob_search", path=str(tmp_path), max_depth=2)
    assert "main.cpp" not in res["plain_text_response"]
    assert "notes.txt" in res["plain_text_response"]
    res = call("file_glob_search", path=str(tmp_path), limit=1)
    assert len(res["entries"]) == 1
    text = res["plain_text_response"]
    assert "Total matches: 3" in text and "[1 results limit reached (3 total matches)." in text


def test_glob_relative_to_cwd(tmp_path: Path):
    make_tree(tmp_path)
    res = call("file_glob_search", path=".", include="*.txt", cwd=str(tmp_path / "project-beta"))
    assert res["entries"] == [{"path": "notes.txt", "type": "file"}]
    assert res["base"] == str(tmp_path / "project-beta")


def test_glob_in_git_repo_honours_gitignore(tmp_path: Path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "kept.txt").write_text("k")
    (tmp_path / "dropped.log").write_text("d")
    paths = [e["path"] for e in call("file_glob_search", path=str(tmp_path))["entries"]]
    assert sorted(paths) == [".gitignore", "kept.txt"]


def test_glob_errors(tmp_path: Path):
    assert error("file_glob_search", path=str(tmp_path), type="bogus") == (
        'invalid type: bogus (expected "file", "dir" or "all")'
    )
    assert error("file_glob_search", path=str(tmp_path), limit=0) == (
        "invalid limit: 0 (expected 1 or more)"
    )
    assert error("file_glob_search", path="nope", cwd=str(tmp_path)) == (
        "path does not exist or is not a directory: nope"
    )


def test_glob_match():
    assert glob_match("*.py", "a.py") and not glob_match("*.py", "d/a.py")
    assert glob_match("**/*.py", "d/e/a.py") and glob_match("**", "")
    assert glob_match("a?c", "abc") and not glob_match("a?c", "a/c")
    assert glob_match("[a-c]x", "bx") and not glob_match("[!a-c]x", "bx")
    assert glob_match("[]]", "]") and glob_match("[x", "[x") and glob_match("[-a]", "-")
    assert not glob_match("*" * 40 + "x", "a" * 3000)  # no exponential backtracking
    assert path_glob_match("t.py", "a/b/t.py")  # no '/': the basename at any depth
    assert path_glob_match("b/*.py", "a/b/t.py")  # auto-anchored with **/
    assert not path_glob_match("/b/*.py", "b/t.py")


# grep_search


def test_grep(tmp_path: Path):
    make_tree(tmp_path)
    (tmp_path / "project-beta" / "notes.txt").write_text("a\nneedle one\nb\nNEEDLE two\n")
    res = call("grep_search", path=str(tmp_path), pattern="needle")
    assert res["plain_text_response"] == (
        "project-beta/notes.txt:needle one\n\n---\nTotal matches: 1\n"
    )
    text = call(
        "grep_search", path=str(tmp_path), pattern="needle", ignore_case=True, context_lines=1
    )["plain_text_response"]
    assert text == (
        "project-beta/notes.txt-1-a\n"
        "project-beta/notes.txt:2:needle one\n"
        "project-beta/notes.txt-3-b\n--\n"
        "project-beta/notes.txt-3-b\n"
        "project-beta/notes.txt:4:NEEDLE two\n--\n"
        "\n---\nTotal matches: 2\n"
    )


def test_grep_single_file_literal_and_filters(tmp_path: Path):
    f = tmp_path / "x.c"
    f.write_text("a.b(c)\naxb(c)\n")
    res = call("grep_search", path="x.c", pattern="a.b(c)", literal=True, cwd=str(tmp_path))
    assert res["plain_text_response"].startswith("x.c:a.b(c)\n\n---\nTotal matches: 1")
    text = call(
        "grep_search", path=str(tmp_path), pattern="b", return_line_numbers=True, include="*.c"
    )["plain_text_response"]
    assert text.startswith("x.c:1:a.b(c)\nx.c:2:axb(c)\n")
    res = call("grep_search", path=str(tmp_path), pattern="b", exclude="*.c")
    assert "Total matches: 0" in res["plain_text_response"]


def test_grep_limit(tmp_path: Path):
    (tmp_path / "many.txt").write_text("hit\n" * 150)
    text = call("grep_search", path=str(tmp_path), pattern="hit")["plain_text_response"]
    assert text.count("many.txt:hit") == 100
    assert "[100 matches limit reached." in text


def test_grep_errors(tmp_path: Path):
    assert error("grep_search", path=str(tmp_path), pattern="(").startswith("invalid regex: ")
    assert error("grep_search", path="nope", pattern="x", cwd=str(tmp_path)) == (
        "path does not exist: nope"
    )


# exec_shell_command


def test_exec(tmp_path: Path):
    res = call("exec_shell_command", command="echo out; echo err >&2; exit 3")
    assert res == {"plain_text_response": "out\nerr\n\n[exit code: 3]"}
    call("exec_shell_command", command="echo hi > marker.txt", cwd=str(tmp_path))
    assert (tmp_path / "marker.txt").read_text() == "hi\n"


def test_exec_bad_cwd(tmp_path: Path):
    res = call("exec_shell_command", command="true", cwd=str(tmp_path / "missing"))
    assert res["plain_text_response"] == "failed to spawn process\n[exit code: -1]"


def test_exec_output_cap():
    res = call("exec_shell_command", command="yes | head -c 100000", max_output_size=10)
    assert res["plain_text_response"] == "y\ny\ny\ny\ny\n\n[output truncated]\n[exit code: 0]"
    # past the cap is the cap, and a negative size is the cap too
    for size in (10**9, -1):
        text = call("exec_shell_command", command="yes | head -c 100000", max_output_size=size)
        assert len(text["plain_text_response"].split("\n[output truncated]")[0]) == 16 * 1024


def test_exec_timeout_kills_the_whole_group():
    # the background `sleep` holds the output pipe: killing `sh` alone would not return
    t = time.monotonic()
    res = call("exec_shell_command", command="echo start; sleep 30 & sleep 30", timeout=1)
    assert time.monotonic() - t < 5
    assert res["plain_text_response"] == "start\n\n[exit code: 1] [exit due to timed out]"


def test_exec_timeout_after_output_closed():
    # the output pipe is closed at once, but the process lives on: the deadline still holds
    t = time.monotonic()
    res = call("exec_shell_command", command="echo hi; exec >&- 2>&-; sleep 30", timeout=1)
    assert time.monotonic() - t < 5
    assert res["plain_text_response"] == "hi\n\n[exit code: 1] [exit due to timed out]"


def test_exec_stream():
    chunks, res = stream_call(
        TOOLS["exec_shell_command"], {"command": "echo a; sleep 0.2; echo b; exit 4"}
    )
    assert res == {}
    assert chunks == ["a\n", "b\n", "\n[exit code: 4]"]


def test_exec_stream_client_gone_after_output(tmp_path: Path):
    t = time.monotonic()
    chunks, _ = stream_call(
        TOOLS["exec_shell_command"],
        {"command": "echo first; sleep 0.5; echo second; sleep 30", "timeout": 60},
        stop_after=1,
    )
    assert time.monotonic() - t < 5
    assert chunks == ["first\n"]  # no more output, and no exit-code tail


def test_exec_stream_client_gone_while_silent(tmp_path: Path):
    stopped = threading.Event()
    threading.Timer(0.3, stopped.set).start()
    marker = tmp_path / "late"
    t = time.monotonic()
    TOOLS["exec_shell_command"].invoke(
        {"command": f"sleep 2; touch {marker}", "timeout": 60}, ToolStream(lambda c: None, stopped)
    )
    assert time.monotonic() - t < 2
    time.sleep(2.2)
    assert not marker.exists()  # the command was killed, not left running


def test_exec_stream_multibyte_split():
    # a UTF-8 sequence cut between two reads still reaches the client whole
    cmd = "printf '\\303'; sleep 0.2; printf '\\251'"
    chunks, _ = stream_call(TOOLS["exec_shell_command"], {"command": cmd})
    assert "".join(chunks).startswith("\u00e9\n[exit code: 0]")


# get_info


def test_get_info(tmp_path: Path):
    res = call("get_info", cwd=str(tmp_path))
    assert res["cwd"] == str(tmp_path) and res["os"].startswith(os.uname().sysname)
    assert call("get_info")["cwd"] == os.getcwd()


# runtimes (X-Tool-Runtime)


@pytest.mark.parametrize(
    ("runtime", "message"),
    [
        ("fake:does-not-exist", "unknown tool runtime: fake:does-not-exist"),
        ("ssh:-oProxyCommand=touch /tmp/pwned", "invalid ssh target: -oProxyCommand=touch"),
        ("ssh:host;id", "invalid ssh target: host;id"),
        ("ssh:", "invalid ssh target: "),
        ("docker-container:--privileged", "invalid container id: --privileged"),
        ("podman-container:-it", "invalid container id: -it"),
        ("docker-container:a b", "invalid container id: a b"),
        ("docker:busybox", "tool runtime must name a running container: docker:busybox"),
    ],
)
def test_runtime_rejected(tmp_path: Path, runtime: str, message: str):
    marker = tmp_path / "ran"
    params = {"command": f"touch {marker}", "runtime": runtime}
    with pytest.raises(ToolRuntimeError) as e:
        TOOLS["exec_shell_command"].invoke(params)
    assert str(e.value).startswith(message)
    assert not marker.exists()  # never falls back to the host
    for name, p in [("read_file", {"path": "x"}), ("get_info", {})]:
        with pytest.raises(ToolRuntimeError):
            TOOLS[name].invoke({**p, "runtime": runtime})


def test_check_runtime():
    for good in ("docker-container:abc123", "podman-container:my_box.1", "ssh:me@host.lan"):
        check_runtime(good)
    check_runtime("docker:busybox")  # a spawn spec: validated only, nothing spawned
    for bad, message in [
        ("fake:x", "unknown tool runtime"),
        ("ssh:-oX=y", "invalid ssh target"),
        ("docker-container:--privileged", "invalid container id"),
        ("podman:", "--tools-runtime podman:<image> requires an image name"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_runtime(bad)


def test_isolate_argv():
    io = make_io({"runtime": "docker-container:abc", "cwd": "/w"})
    assert isinstance(io, ContainerIO)
    assert io.build_argv(["cat", "f"], False) == ["docker", "exec", "abc", "cat", "f"]
    assert io.build_argv(["cat"], True) == ["docker", "exec", "-i", "abc", "cat"]
    assert io.resolve("a/b") == "/w/a/b" and io.resolve("/abs") == "/abs"
    ssh = make_io({"runtime": "ssh:me@host"})
    assert isinstance(ssh, SshIO)
    argv = ssh.build_argv(["echo", "it's $HOME"], False)
    assert argv[-3:] == ["-n", "me@host", "'echo' 'it'\\''s $HOME'"]
    assert "BatchMode=yes" in argv and "StrictHostKeyChecking=yes" in argv


def test_shell_quote_join_round_trip():
    argv = ["a b", "it's", "$(id)", "`x`", '"q"', "", "\\n"]
    script = "for a in " + shell_quote_join(argv) + '; do printf "%s|" "$a"; done'
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout == "|".join(argv) + "|"


class HostIsolate(IsolateIO):
    """The isolate's commands run as they are on this host: exercises the sh/find/cat
    scripts an isolate runs without a container engine."""

    def build_argv(self, inner: list[str], needs_stdin: bool) -> list[str]:
        return inner


def test_isolate_operations(tmp_path: Path):
    for cmd in ("timeout", "find", "wc", "dirname"):
        if shutil.which(cmd) is None:
            pytest.skip(f"{cmd} is not installed")
    io = HostIsolate(str(tmp_path))
    assert io.write_file("d/e.txt", b'he said "it\'s"\n\x00')
    assert io.read_file("d/e.txt") == b'he said "it\'s"\n\x00'
    assert io.file_size("d/e.txt") == 16 and io.file_size("nope") is None
    assert io.is_regular_file("d/e.txt") and io.is_directory("d") and not io.is_directory("x")
    make_tree(tmp_path)
    files = io.list_entries(str(tmp_path), 0, FILES)
    assert sorted(e.rel for e in files.entries) == [
        "d/e.txt",
        "project-alpha/README.md",
        "project-alpha/src/main.cpp",
        "project-beta/notes.txt",
    ]
    dirs = io.list_entries(str(tmp_path), 1, DIRS)
    assert sorted(e.rel for e in dirs.entries) == ["build", "d", "project-alpha", "project-beta"]
    assert io.list_entries("nope", 0, FILES).err == "path does not exist or is not a directory"
    res = io.run(["sh", "-c", "pwd; exit 5"], 1000, 5)
    assert res.output == f"{tmp_path}\n".encode() and res.exit_code == 5


def test_run_subprocess_spawn_failure():
    res = run_subprocess(["/definitely/not/a/binary"], 100, 5)
    assert res.output == b"failed to spawn process" and res.exit_code == -1
