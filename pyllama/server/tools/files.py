"""The read_file and write_file built-in tools (edit_file is in ``edit.py``)."""

from __future__ import annotations

import base64
from typing import Any

from pyllama.server.tools.base import Tool, ToolStream
from pyllama.server.tools.isolate import make_io
from pyllama.server.tools.params import (
    function_def,
    opt_bool,
    opt_int,
    opt_str,
    prop,
    required_str,
)

READ_FILE_MAX_SIZE = 16 * 1024  # of text returned to the model
READ_FILE_MAX_SIZE_BASE64 = 32 * 1024 * 1024  # X-Resp-Type: base64, for a UI


class ReadFile(Tool):
    name = "read_file"
    display_name = "Read file"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        return function_def(
            self.name,
            "Read the contents of a file. Optionally specify a 1-based line range. "
            'If append_loc is true, each line is prefixed with its line number (e.g. "1\u2192...").',
            {
                "path": prop("string", "Path to the file"),
                "start_line": prop("integer", "First line to read, 1-based (default: 1)"),
                "end_line": prop(
                    "integer", "Last line to read, 1-based inclusive (default: end of file)"
                ),
                "append_loc": prop("boolean", "Prefix each line with its line number"),
            },
            ["path"],
        )

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        path = required_str(params, "path")
        start_line = opt_int(params, "start_line", 1)
        end_line = opt_int(params, "end_line", -1)  # -1: to the end
        append_loc = opt_bool(params, "append_loc")
        # set from the X-Resp-Type header only, the model cannot ask for it
        as_base64 = opt_str(params, "resp_type") == "base64"

        io = make_io(params)
        size = io.file_size(path)
        if size is None:
            return {"error": f"cannot stat file: {path}"}

        if as_base64:
            if size > READ_FILE_MAX_SIZE_BASE64:
                return {"error": f"file too large ({size} bytes, max {READ_FILE_MAX_SIZE_BASE64})"}
            data = io.read_file(path)
            if data is None:
                return {"error": f"failed to open file: {path}"}
            return {"base64": base64.b64encode(data).decode("ascii"), "size_bytes": len(data)}

        if size > READ_FILE_MAX_SIZE and end_line == -1:
            return {
                "error": f"file too large ({size} bytes, max {READ_FILE_MAX_SIZE}). "
                "Use start_line/end_line to read a portion."
            }
        data = io.read_file(path)
        if data is None:
            return {"error": f"failed to open file: {path}"}

        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()  # the newline ending the last line starts no new one
        out = bytearray()
        for lineno, line in enumerate(lines, 1):
            if lineno < start_line:
                continue
            if end_line != -1 and lineno > end_line:
                break
            prefix = f"{lineno}\u2192".encode() if append_loc else b""
            out_line = prefix + line + b"\n"
            if len(out) + len(out_line) > READ_FILE_MAX_SIZE:
                out += b"[output truncated]"
                break
            out += out_line
        return {"plain_text_response": out.decode("utf-8", "replace")}


class WriteFile(Tool):
    name = "write_file"
    display_name = "Write file"
    uses_cwd = True
    permission_write = True

    def definition(self) -> dict[str, Any]:
        return function_def(
            self.name,
            "Write content to a file, creating it (including parent directories) if it does "
            "not exist. May use with edit_file for more complex edits.",
            {
                "path": prop("string", "Path of the file to write"),
                "content": prop("string", "Content to write"),
            },
            ["path", "content"],
        )

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        path = required_str(params, "path")
        content = required_str(params, "content").encode("utf-8", "replace")
        if not make_io(params).write_file(path, content):
            return {"error": f"failed to write file: {path}"}
        return {"result": "file written successfully", "path": path, "bytes": len(content)}
