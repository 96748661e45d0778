"""The edit_file built-in tool: exact text replacements, with llama-server's fallback to
a whitespace- and typography-insensitive match when an ``old_text`` is not found as is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyllama.server.tools.base import Tool, ToolStream
from pyllama.server.tools.isolate import make_io
from pyllama.server.tools.params import ToolParamError, function_def, prop, required, required_str

# smart quotes, dashes and odd spaces a model tends to write for their ASCII forms
_FUZZY = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u202f\u205f\u3000", " "),
        **dict.fromkeys([chr(c) for c in range(0x2002, 0x200B)], " "),
    }
)


def normalize_for_fuzzy_match(text: str) -> str:
    """Per line: trailing spaces/tabs/CRs dropped, then the characters above made ASCII.
    Line count and order are kept."""
    return "\n".join(line.rstrip(" \t\r").translate(_FUZZY) for line in text.split("\n"))


@dataclass
class _Match:
    edit_index: int
    start: int  # in the base content (the original, or its fuzzy form)
    length: int
    new_text: str


def _apply(content: str, matches: list[_Match], offset: int = 0) -> str:
    for m in reversed(matches):  # ascending and disjoint: replace from the end
        i = m.start - offset
        content = content[:i] + m.new_text + content[i + m.length :]
    return content


def _lines_with_endings(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _apply_keeping_lines(original: str, base: str, matches: list[_Match]) -> str:
    """Apply matches found in the fuzzy ``base``, taking every line no match touches
    verbatim from ``original`` (so the file's own whitespace and quotes stay)."""
    original_lines = _lines_with_endings(original)
    spans, pos = [], 0
    for line in _lines_with_endings(base):
        spans.append((pos, pos + len(line)))
        pos += len(line)

    groups: list[tuple[int, int, list[_Match]]] = []  # [start line, end line), matches
    for m in matches:
        first = next((i for i, (s, e) in enumerate(spans) if s <= m.start < e), 0)
        last = first
        while last < len(spans) - 1 and spans[last][1] < m.start + m.length:
            last += 1
        if groups and first < groups[-1][1]:
            start, end, reps = groups[-1]
            groups[-1] = (start, max(end, last + 1), [*reps, m])
        else:
            groups.append((first, last + 1, [m]))

    out, line = [], 0
    for start, end, reps in groups:
        out += original_lines[line:start]
        lo, hi = spans[start][0], spans[end - 1][1]
        out.append(_apply(base[lo:hi], reps, lo))
        line = end
    out += original_lines[line:]
    return "".join(out)


def _count(haystack: str, needle: str) -> int:
    return haystack.count(needle) if needle else 0  # non-overlapping, as upstream


class EditFile(Tool):
    name = "edit_file"
    display_name = "Edit file"
    uses_cwd = True
    permission_write = True

    def definition(self) -> dict[str, Any]:
        item = {
            "type": "object",
            "properties": {
                "old_text": prop(
                    "string",
                    "Exact text to find; must be unique in the file and must not overlap "
                    "with other edits",
                ),
                "new_text": prop("string", "Text to replace old_text with"),
            },
            "required": ["old_text", "new_text"],
        }
        return function_def(
            self.name,
            "Edit a file using exact text replacement. Each edits[].old_text must be unique "
            "in the file and is matched against the original content, not incrementally. "
            "Merge nearby changes into one edit instead of overlapping edits. Use write_file "
            "to replace the whole file.",
            {
                "path": prop("string", "Path to the file to edit"),
                "edits": {
                    "type": "array",
                    "description": "One or more exact text replacements to apply",
                    "items": item,
                },
            },
            ["path", "edits"],
        )

    def invoke(self, params: dict[str, Any], stream: ToolStream | None = None) -> dict[str, Any]:
        path = required_str(params, "path")
        edits_v = required(params, "edits")
        if not isinstance(edits_v, list) or not edits_v:
            return {"error": '"edits" must be a non-empty array'}
        edits: list[tuple[str, str]] = []
        for e in edits_v:
            if not isinstance(e, dict):
                raise ToolParamError(
                    "[json.exception.type_error.304] cannot use at() with " + type(e).__name__
                )
            old, new = required_str(e, "old_text"), required_str(e, "new_text")
            if not old:
                return {"error": f"edits[{len(edits)}].old_text must not be empty"}
            edits.append((old, new))

        io = make_io(params)
        data = io.read_file(path)
        if data is None:
            return {"error": f"failed to open file: {path}"}
        # surrogateescape: bytes that are not UTF-8 come back unchanged on write
        original = data.decode("utf-8", "surrogateescape")
        fuzzy_original = normalize_for_fuzzy_match(original)

        any_fuzzy = False
        for i, (old, _) in enumerate(edits):
            if old in original:
                continue
            if normalize_for_fuzzy_match(old) not in fuzzy_original:
                return {
                    "error": f"could not find edits[{i}].old_text in {path}, it must match "
                    "the file's current content exactly"
                }
            any_fuzzy = True
        base = fuzzy_original if any_fuzzy else original

        # uniqueness is always judged on the fuzzy forms: a whitespace-only twin counts
        matches: list[_Match] = []
        for i, (old, new) in enumerate(edits):
            fuzzy_old = normalize_for_fuzzy_match(old)
            n = _count(fuzzy_original, fuzzy_old)
            if n > 1:
                return {
                    "error": f"found {n} occurrences of edits[{i}].old_text in {path}, "
                    "it must be unique"
                }
            needle = fuzzy_old if any_fuzzy else old
            start = base.find(needle)
            if start < 0:
                return {
                    "error": f"could not find edits[{i}].old_text in {path}, it must match "
                    "the file's current content exactly"
                }
            matches.append(_Match(i, start, len(needle), new))

        matches.sort(key=lambda m: m.start)
        for a, b in zip(matches, matches[1:]):
            if a.start + a.length > b.start:
                return {
                    "error": f"edits[{a.edit_index}] and edits[{b.edit_index}] overlap in {path}; "
                    "merge them into one edit or target disjoint regions"
                }

        updated = (
            _apply_keeping_lines(original, base, matches) if any_fuzzy else _apply(base, matches)
        )
        if updated == original:
            return {"error": "no changes made: the replacement(s) produced identical content"}
        try:
            content = updated.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate sent in new_text
            content = updated.encode("utf-8", "replace")
        if not io.write_file(path, content):
            return {"error": f"failed to write file: {path}"}
        return {"result": "file edited successfully", "path": path, "edits_applied": len(matches)}
