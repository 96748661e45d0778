"""The prompt layouts behind llama-cpp-python's named chat formats (FastChat's conversation
styles): each turn is a role marker, the text and a separator, with small differences in
where the colon, the space and the system text go. ``llama_chat_format`` builds its
``format_*`` functions from these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

__all__ = ["Turn", "render", "system_text", "turns"]

Turn = tuple[str, Optional[str]]  # (role marker, text; None: the turn to be generated)


def system_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The first system message's text ("" without one)."""
    for m in messages:
        if m["role"] == "system":
            return m.get("content") or ""
    return ""


def turns(messages: Sequence[Mapping[str, Any]], markers: Mapping[str, str]) -> list[Turn]:
    """The messages whose role has a marker, as (marker, text); content parts (not a str)
    count as no text, as in llama-cpp-python."""
    out: list[Turn] = []
    for m in messages:
        marker = markers.get(m["role"])
        if marker is not None:
            content = m.get("content")
            out.append((marker, content if isinstance(content, str) else None))
    return out


def render(style: str, system: str, items: Sequence[Turn], sep: str, sep2: str = "") -> str:
    """One prompt in ``style``:

    - ``llama2``: system + sep, then "marker text " + sep/sep2 alternately (the first turn
      after a system text is bare); an open turn is "marker ".
    - ``colon``: system + sep, then "marker: text" + sep; open: "marker:".
    - ``colon_space``: as colon, the open turn "marker: ".
    - ``colon_two``: as colon, separators alternating sep/sep2.
    - ``plain``: system, then "marker" + "text" + sep; open: "marker".
    - ``chatml``: system + sep + newline (when any), then "marker\\ntext" + sep + newline;
      open: "marker\\n".
    - ``glm``: system, then "marker\\n text"; open: "marker".
    """
    seps = (sep, sep2 or sep)
    if style == "llama2":
        out = system + sep
        for i, (role, text) in enumerate(items):
            if system and i == 0:
                out += (text or "") + seps[i % 2]
            elif text:
                out += f"{role}{text} {seps[i % 2]}"
            else:
                out += role + " "
        return out
    if style in ("colon", "colon_space", "colon_two"):
        out = system + sep
        open_end = ": " if style == "colon_space" else ":"
        for i, (role, text) in enumerate(items):
            end = seps[i % 2] if style == "colon_two" else sep
            out += f"{role}: {text}{end}" if text else role + open_end
        return out
    if style == "plain":
        return system + "".join(f"{r}{t}{sep}" if t else r for r, t in items)
    if style == "chatml":
        out = f"{system}{sep}\n" if system else ""
        return out + "".join(f"{r}\n{t}{sep}\n" if t else f"{r}\n" for r, t in items)
    if style == "glm":
        return system + "".join(f"{r}\n {t}" if t else r for r, t in items)
    raise ValueError(f"unknown chat style {style!r}")
