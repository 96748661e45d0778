"""The file_glob_search and grep_search built-in tools."""

from __future__ import annotations

import re
from typing import Any

from pyllama.server.tools.base import Tool, ToolStream
from pyllama.server.tools.globmatch import path_glob_match
from pyllama.server.tools.isolate import make_io
from pyllama.server.tools.localio import ALL, DIRS, FILES, ListEntry
from pyllama.server.tools.params import (
    function_def,
    opt_bool,
    opt_int,
    opt_str,
    prop,
    required_str,
)

FILE_SEARCH_MAX_RESULTS = 100
GREP_SEARCH_MAX_RESULTS = 100
_KINDS = {"file": FILES, "dir": DIRS, "all": ALL}

_SKIPS = (
    "Automatically skips files ignored by .gitignore (when the directory is inside a git "
    "repo) and common junk directories (.git, node_modules, build, dist, etc.) otherwise. "
)


def _selected(rel: str, include: str, exclude: str) -> bool:
    return path_glob_match(include, rel) and not (exclude and path_glob_match(exclude, rel))


class FileGlobSearch(Tool):
    name = "file_glob_search"
    display_name = "File search"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        n = FILE_SEARCH_MAX_RESULTS
        return function_def(
            self.name,
            "Recursively search for files matching a glob pattern under a directory. "
            + _SKIPS
            + "A pattern with no '/' (e.g. \"*.cpp\") matches the file's basename at any depth. "
            "A pattern containing '/' matches the full relative path; unless already anchored "
            'with "**/" or a leading \'/\', it is automatically prefixed with "**/". '
            'Use type="dir" or "all" to also list directories; directory entries are suffixed '
            "with '/' in the output. Note: directory listings do not apply .gitignore filtering.",
            {
                "path": prop("string", "Base directory to search in"),
                "include": prop(
                    "string",
                    'Glob pattern for files to include (e.g. "*.cpp" or "src/**/*.cpp"). '
                    "Default: **",
                ),
                "exclude": prop("string", "Glob pattern for files to exclude"),
                "type": prop("string", 'Entry type to return: "file" (default), "dir" or "all"'),
                "max_depth": prop(
                    "integer",
                    "Maximum depth to descend into subdirectories (default: 0 = unlimited; "
                    "1 = direct children only)",
                ),
                "limit": prop(
                    "integer", f"Maximum number of results to return, capped at {n} (default {n})"
                ),
            },
            ["path"],
        )

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        io = make_io(params)
        path = required_str(params, "path")
        base = io.resolve(path)
        include = opt_str(params, "include", "**")
        exclude = opt_str(params, "exclude")
        type_ = opt_str(params, "type", "file")
        max_depth = max(0, opt_int(params, "max_depth", 0))
        limit = opt_int(params, "limit", FILE_SEARCH_MAX_RESULTS)
        if limit < 1:
            return {"error": f"invalid limit: {limit} (expected 1 or more)"}
        limit = min(limit, FILE_SEARCH_MAX_RESULTS)
        kind = _KINDS.get(type_)
        if kind is None:
            return {"error": f'invalid type: {type_} (expected "file", "dir" or "all")'}

        listing = io.list_entries(base, max_depth, kind)
        if listing.err:
            return {"error": f"{listing.err}: {path}"}
        matches = [e for e in listing.entries if _selected(e.rel, include, exclude)]
        shown: list[ListEntry] = matches[:limit]

        text = "".join(f"{e.rel}{'/' if e.is_dir else ''}\n" for e in shown)
        text += f"\n---\nTotal matches: {len(matches)}\n"
        if len(matches) > len(shown):
            text += (
                f"[{len(shown)} results limit reached ({len(matches)} total matches). "
                "Refine the glob pattern to narrow the search.]\n"
            )
        if listing.truncated:
            text += "[results truncated: time budget or unreadable directory]\n"
        # `base` is absolute, so a client (the web UI's picker) can join the entries to it;
        # `plain_text_response` is what the model sees, `entries` the same for the UI
        entries = [{"path": e.rel, "type": "dir" if e.is_dir else "file"} for e in shown]
        return {"plain_text_response": text, "entries": entries, "base": base}


class GrepSearch(Tool):
    name = "grep_search"
    display_name = "Grep search"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        return function_def(
            self.name,
            "Search for a pattern in files under a path. Returns matching lines with file paths "
            "(and, unless searching a single file, paths relative to the given directory). "
            + _SKIPS
            + "include/exclude: a pattern with no '/' matches the basename at any depth; a "
            "pattern containing '/' matches the full relative path (auto-anchored with \"**/\" "
            "unless already anchored).",
            {
                "path": prop("string", "File or directory to search in"),
                "pattern": prop(
                    "string", "Pattern to search for (regular expression unless literal is true)"
                ),
                "include": prop("string", "Glob pattern to filter files (default: **)"),
                "exclude": prop("string", "Glob pattern to exclude files"),
                "return_line_numbers": prop("boolean", "If true, include line numbers in results"),
                "literal": prop(
                    "boolean",
                    "Treat pattern as a literal string instead of a regular expression "
                    "(default: false)",
                ),
                "ignore_case": prop("boolean", "Case-insensitive search (default: false)"),
                "context_lines": prop(
                    "integer",
                    "Number of lines of context to show before and after each match (default: 0)",
                ),
            },
            ["path", "pattern"],
        )

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        path = required_str(params, "path")
        pattern_src = required_str(params, "pattern")
        include = opt_str(params, "include", "**")
        exclude = opt_str(params, "exclude")
        show_lineno = opt_bool(params, "return_line_numbers")
        ctx = max(0, opt_int(params, "context_lines", 0))
        if opt_bool(params, "literal"):
            pattern_src = re.escape(pattern_src)
        try:
            pattern = re.compile(
                pattern_src, re.IGNORECASE if opt_bool(params, "ignore_case") else 0
            )
        except re.error as e:
            return {"error": f"invalid regex: {e}"}

        io = make_io(params)
        files: list[tuple[str, str]] = []  # (absolute path, path shown)
        abs_path = io.resolve(path)
        if io.is_regular_file(abs_path):
            files.append((abs_path, path))
        elif io.is_directory(abs_path):
            listing = io.list_entries(abs_path, 0, FILES)
            if listing.err:
                return {"error": f"{listing.err}: {path}"}
            files += [
                (f"{abs_path.rstrip('/')}/{e.rel}", e.rel)
                for e in listing.entries
                if _selected(e.rel, include, exclude)
            ]
        else:
            return {"error": f"path does not exist: {path}"}

        out: list[str] = []
        total = 0
        limit_reached = False
        show_num = show_lineno or ctx > 0
        for fpath, shown in files:
            if limit_reached:
                break
            data = io.read_file(fpath)
            if data is None:
                continue
            lines = data.decode("utf-8", "replace").split("\n")
            if lines[-1] == "":
                lines.pop()
            for i, line in enumerate(lines):
                if total >= GREP_SEARCH_MAX_RESULTS:
                    limit_reached = True
                    break
                if not pattern.search(line):
                    continue
                for j in range(max(0, i - ctx), min(len(lines) - 1, i + ctx) + 1):
                    sep = ":" if j == i else "-"
                    num = f"{j + 1}{sep}" if show_num else ""
                    out.append(f"{shown}{sep}{num}{lines[j]}\n")
                if ctx > 0:
                    out.append("--\n")
                total += 1

        text = "".join(out) + f"\n---\nTotal matches: {total}\n"
        if limit_reached:
            text += (
                f"[{GREP_SEARCH_MAX_RESULTS} matches limit reached. "
                "Narrow the path/pattern/include to see more.]\n"
            )
        return {"plain_text_response": text}
