"""Images (and audio) in llama-cpp-python chat messages, for the in-process multimodal
handlers: each ``image_url``/``input_audio`` part becomes the projector's marker and its
bytes, as pyllama-server does for ``--mmproj``. Sources: a ``data:`` URI, raw base64, a
local path or ``file://`` URL, or an http(s) URL (fetched with the standard library)."""

from __future__ import annotations

import base64
import binascii
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["has_media", "load", "take_media"]

MEDIA_PARTS = ("image_url", "input_audio")


def has_media(messages: Any) -> bool:
    return isinstance(messages, (list, tuple)) and any(
        isinstance(m, Mapping)
        and isinstance(m.get("content"), list)
        and any(isinstance(p, Mapping) and p.get("type") in MEDIA_PARTS for p in m["content"])
        for m in messages
    )


def _b64(data: str) -> bytes:
    try:
        out = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"invalid base64 media: {e}") from e
    if not out:
        raise ValueError("invalid base64 media: empty")
    return out


def load(url: str, timeout: float = 60.0) -> bytes:
    """The bytes a part's URL names."""
    if url.startswith("data:"):
        head, sep, data = url.partition(",")
        if not sep or not head.endswith(";base64"):
            raise ValueError(f"a data URI must be base64 encoded: {head[:40]}")
        return _b64(data)
    scheme = urllib.parse.urlparse(url).scheme
    if scheme in ("http", "https"):
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read()
    if scheme == "file":
        return Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path)).read_bytes()
    path = Path(url)
    if len(url) < 4096 and path.is_file():
        return path.read_bytes()
    return _b64(url)  # raw base64, as llama-cpp-python's handlers take it


def _url(part: Mapping[str, Any], key: str, names: tuple[str, ...]) -> str:
    value = part.get(key)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for name in names:
            if isinstance(value.get(name), str):
                return value[name]
    raise ValueError(f"a {key!r} part needs {' or '.join(repr(n) for n in names)}")


def take_media(messages: Any, marker: str) -> tuple[list[Any], list[bytes]]:
    """(the messages with a marker part for each medium, the media bytes in order)."""
    files: list[bytes] = []
    out = []
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if not isinstance(content, list):
            out.append(m)
            continue
        parts = []
        for p in content:
            kind = p.get("type") if isinstance(p, Mapping) else None
            if kind == "image_url":
                files.append(load(_url(p, "image_url", ("url",))))
            elif kind == "input_audio":
                files.append(_b64(_url(p, "input_audio", ("data",))))
            else:
                parts.append(p)
                continue
            parts.append({"type": "media_marker", "text": marker})
        out.append({**m, "content": parts})
    return out, files
