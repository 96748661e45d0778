"""OpenAI-shaped messages with media parts to messages with media markers, and the
media's bytes in order (llama-server's ``oaicompat_content_load_media``): each
``image_url``, ``input_audio``, ``input_video`` (or ``video_url``) part becomes
``{"type": "media_marker", "text": marker}``, which the chat template sees as text. What
the bytes are decides how they are read, as in llama.cpp (``sniff``): a video, whatever
its part, becomes ``Video:`` and one marker per frame with timestamps between (``video``).
Every protocol translates its own media parts to these OpenAI ones first (Anthropic
``image``, Responses ``input_image``, Ollama ``images``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.media import sniff, sources, video

__all__ = [
    "MEDIA_PARTS",
    "MediaRules",
    "has_media",
    "image_part",
    "media_marker",
    "take_media",
    "unsupported",
]

MEDIA_PARTS = ("image_url", "input_audio", "input_video", "video_url")


def media_marker() -> str:
    """The text that stands for a medium in prompts: llama-server's own (random per server
    process, ``<__media_XXXX__>``, so that text a client sends can never pose as one;
    ``LLAMA_MEDIA_MARKER`` pins it), the marker llama.cpp's chat layer renders a
    media_marker part as. /props reports it."""
    return _core.chat_media_marker()


@dataclass(frozen=True)
class MediaRules:
    """What the loaded model takes and where media may come from."""

    image: bool = False
    audio: bool = False
    marker: str = "<__media__>"
    media_path: str | None = None
    allow_private: bool = False
    video: video.VideoOptions | None = None  # None: no video (a model without vision)


def unsupported(kind: str) -> APIError:
    """llama-server's message for media the model cannot take (a 400 here)."""
    return APIError(
        400,
        f"{kind} input is not supported - hint: if this is unexpected, you may need to "
        "provide the mmproj",
    )


def image_part(url: str) -> dict[str, Any]:
    """An OpenAI image part (a URL, data URI or raw base64), for the other protocols."""
    return {"type": "image_url", "image_url": {"url": url}}


def has_media(messages: Any) -> bool:
    if not isinstance(messages, list):
        return False
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(p, Mapping) and p.get("type") in MEDIA_PARTS for p in content
        ):
            return True
    return False


def _url(part: Mapping[str, Any], key: str, inner: tuple[str, ...]) -> Any:
    value = part.get(key)
    if isinstance(value, str):  # a bare string, as some clients send
        return value
    if isinstance(value, Mapping):
        for name in inner:
            if value.get(name):
                return value[name]
    raise APIError(400, f"'{key}' needs {' or '.join(repr(n) for n in inner)}")


async def _read(data: bytes, rules: MediaRules, index: int) -> tuple[str, list[bytes]]:
    """(the text for one medium, its files): a video's frames, a WebP's still frame, or
    the bytes as they are for the projector (images, audio, and what it will refuse)."""
    if rules.video is not None:  # a model with vision
        what = sniff.kind(data)
        if what == "webp":
            return rules.marker, [await video.still(data, rules.video, index)]
        if what == "other":
            return await video.video_prompt(data, rules.video, rules.marker, index)
    return rules.marker, [data]


async def take_media(messages: Any, rules: MediaRules) -> tuple[Any, list[bytes]]:
    """(messages with markers, the media bytes in marker order). Messages that hold no
    media come back as they are."""
    if not has_media(messages):
        return messages, []
    files: list[bytes] = []
    out = []
    n_media = 0
    for m in messages:
        content = m.get("content") if isinstance(m, Mapping) else None
        if not isinstance(content, list):
            out.append(m)
            continue
        parts = []
        for p in content:
            kind = p.get("type") if isinstance(p, Mapping) else None
            if kind not in MEDIA_PARTS:
                parts.append(p)
                continue
            assert isinstance(p, Mapping)
            if kind == "image_url":
                if not rules.image:
                    raise unsupported("image")
                url = _url(p, "image_url", ("url",))
            elif kind == "input_audio":
                if not rules.audio:
                    raise unsupported("audio")
                url = _url(p, "input_audio", ("data", "url"))
            else:
                if rules.video is None:
                    raise unsupported("video")
                url = _url(p, kind, ("data", "url"))
            data = await sources.load(
                url, media_path=rules.media_path, allow_private=rules.allow_private
            )
            text, read = await _read(data, rules, n_media)
            files += read
            n_media += 1
            parts.append({"type": "media_marker", "text": text})
        out.append({**m, "content": parts})
    return out, files
