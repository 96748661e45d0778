"""llama.cpp's glob (``common/common.cpp``): ``*`` matches within one path segment, ``**``
across segments, ``?`` one non-'/' character, ``[...]`` a class (``!`` negates, ``a-z``
ranges, a leading ``]`` or ``-`` is literal); an unclosed ``[`` is literal.

Matched as a set of string positions, so a pattern with many stars stays linear rather
than backtracking."""

from __future__ import annotations


def _class_match(c: str, body: str) -> bool:
    i, negated = 0, False
    if body[:1] == "!":
        negated, i = True, 1
    if body[i : i + 1] in ("]", "-"):
        if c == body[i]:
            return not negated
        i += 1
    matched = False
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-" and body[i + 2] != "]":
            if body[i] <= c <= body[i + 2]:
                matched = True
                break
            i += 3
        else:
            if body[i] == c:
                matched = True
                break
            i += 1
    return matched != negated


def _tokens(pattern: str) -> list[tuple[str, str]]:
    """(kind, arg): ("**", ""), ("*", ""), ("?", ""), ("[", class body), ("=", literal)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            out.append(("**", ""))
            i += 2
        elif ch in "*?":
            out.append((ch, ""))
            i += 1
        elif ch == "[":
            end = i + 1
            if pattern[end : end + 1] in ("]", "-"):
                end += 1
            end = pattern.find("]", end)
            if end < 0:  # unclosed: a literal '['
                out.append(("=", "["))
                i += 1
            else:
                out.append(("[", pattern[i + 1 : end]))
                i = end + 1
        else:
            out.append(("=", ch))
            i += 1
    return out


def glob_match(pattern: str, text: str) -> bool:
    n = len(text)
    positions = {0}
    for kind, arg in _tokens(pattern):
        if not positions:
            return False
        if kind == "**":
            positions = set(range(min(positions), n + 1))
        elif kind == "*":
            nxt: set[int] = set()
            covered = -1  # positions up to here are already reached
            for p in sorted(positions):
                if p <= covered:
                    continue
                end = text.find("/", p)
                covered = n if end < 0 else end
                nxt.update(range(p, covered + 1))
            positions = nxt
        elif kind == "?":
            positions = {p + 1 for p in positions if p < n and text[p] != "/"}
        elif kind == "[":
            positions = {p + 1 for p in positions if p < n and _class_match(text[p], arg)}
        else:
            positions = {p + 1 for p in positions if p < n and text[p] == arg}
    return n in positions


def path_glob_match(pattern: str, rel_path: str) -> bool:
    """No '/' in ``pattern``: match the basename at any depth; else the whole relative
    path, anchored with ``**/`` unless it starts with ``**`` or '/'."""
    if "/" not in pattern:
        return glob_match(pattern, rel_path.rsplit("/", 1)[-1])
    if pattern == "**" or pattern.startswith(("**/", "/")):
        return glob_match(pattern, rel_path)
    return glob_match("**/" + pattern, rel_path)
