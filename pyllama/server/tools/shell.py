"""The exec_shell_command and get_info built-in tools."""

from __future__ import annotations

import os
from typing import Any

from pyllama.server.tools.base import Tool, ToolStream
from pyllama.server.tools.isolate import make_io
from pyllama.server.tools.params import function_def, opt_int, opt_str, prop, required_str

EXEC_MAX_OUTPUT_SIZE = 16 * 1024
EXEC_MAX_TIMEOUT = 60  # seconds
EXEC_DEFAULT_TIMEOUT = 10
GET_INFO_MAX_OUTPUT = 4096
GET_INFO_TIMEOUT = 5


def _shell_argv(command: str, runtime: str) -> list[str]:
    # an isolate is always POSIX, whatever the host
    if os.name == "nt" and not runtime:
        return ["cmd", "/c", command]
    return ["sh", "-c", command]


class ExecShellCommand(Tool):
    name = "exec_shell_command"
    display_name = "Execute shell command"
    uses_cwd = True
    permission_write = True
    support_stream = True

    def definition(self) -> dict[str, Any]:
        return function_def(
            self.name,
            "Execute a shell command and return its output (stdout and stderr combined).",
            {
                "command": prop("string", "Shell command to execute"),
                "timeout": prop(
                    "integer", f"Timeout in seconds (default 10, max {EXEC_MAX_TIMEOUT})"
                ),
                "max_output_size": prop(
                    "integer", f"Maximum output size in bytes (default {EXEC_MAX_OUTPUT_SIZE})"
                ),
            },
            ["command"],
        )

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        command = required_str(params, "command")
        timeout = min(opt_int(params, "timeout", EXEC_DEFAULT_TIMEOUT), EXEC_MAX_TIMEOUT)
        max_output = opt_int(params, "max_output_size", EXEC_MAX_OUTPUT_SIZE)
        if max_output < 0:  # upstream's size_t cast makes a negative size the cap
            max_output = EXEC_MAX_OUTPUT_SIZE
        max_output = min(max_output, EXEC_MAX_OUTPUT_SIZE)
        args = _shell_argv(command, opt_str(params, "runtime"))

        io = make_io(params)
        if stream is not None:

            def on_chunk(chunk: str) -> bool:
                stream.push(chunk)
                return stream.alive()

            res = io.run(args, max_output, timeout, on_chunk, lambda: not stream.alive())
            if stream.alive():
                stream.push(self._tail(res.exit_code, res.timed_out))
            return {}

        res = io.run(args, max_output, timeout)
        text = res.output.decode("utf-8", "replace") + self._tail(res.exit_code, res.timed_out)
        return {"plain_text_response": text}

    @staticmethod
    def _tail(exit_code: int, timed_out: bool) -> str:
        return f"\n[exit code: {exit_code}]" + (" [exit due to timed out]" if timed_out else "")


class GetInfo(Tool):
    name = "get_info"
    display_name = "Get Runtime Info"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        return function_def(
            self.name,
            "Returns runtime info: the OS name/version and the current working directory",
            {},
        )

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        io = make_io(params)
        runtime = opt_str(params, "runtime")
        # inside an isolate it is always the POSIX command
        args = ["cmd", "/c", "ver"] if os.name == "nt" and not runtime else ["uname", "-a"]
        res = io.run(args, GET_INFO_MAX_OUTPUT, GET_INFO_TIMEOUT)
        # a failed spawn or a timeout leaves a diagnostic in the output, not an OS name
        ok = res.exit_code == 0 and not res.timed_out
        os_info = res.output.decode("utf-8", "replace").strip() if ok else "unknown"

        cwd = opt_str(params, "cwd")
        if not cwd:
            if not runtime:
                cwd = os.getcwd()
            else:
                pwd = io.run(["pwd"], GET_INFO_MAX_OUTPUT, GET_INFO_TIMEOUT)
                ok = pwd.exit_code == 0 and not pwd.timed_out
                cwd = pwd.output.decode("utf-8", "replace").strip() if ok else "unknown"
        return {"os": os_info, "cwd": cwd}
