"""Test media made from nothing but the standard library: PNG images and WAV audio, as bytes.

* ``png``: an RGB PNG (zlib + struct), either one solid colour or a grid of blocks whose
  colours come from ``random.Random(seed)``: two seeds give visibly different images, one
  seed always the same bytes.
* ``wav``: 16-bit PCM mono (the ``wave`` module), a sine tone, or silence at ``freq=0``.
* ``data_url``: the ``data:<mime>;base64,...`` form OpenAI-style image parts take;
  ``b64`` the bare base64 text (``input_audio.data``).
"""

from __future__ import annotations

import base64
import io
import math
import random
import struct
import wave
import zlib

__all__ = ["b64", "data_url", "png", "wav"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png(
    width: int = 64,
    height: int = 64,
    seed: int = 0,
    *,
    color: tuple[int, int, int] | None = None,
    blocks: int = 4,
) -> bytes:
    """An RGB PNG of ``width`` x ``height``: ``color`` everywhere, else ``blocks`` x ``blocks``
    rectangles of random colours (``seed``) with a diagonal gradient on top."""
    if width < 1 or height < 1:
        raise ValueError("width and height must be >= 1")
    if blocks < 1:
        raise ValueError("blocks must be >= 1")
    if color is None:
        rng = random.Random(seed)
        palette = [
            [tuple(rng.randrange(256) for _ in range(3)) for _ in range(blocks)]
            for _ in range(blocks)
        ]
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type 0 (None) for each scanline
        for x in range(width):
            if color is not None:
                rows += bytes(color)
                continue
            r, g, b = palette[y * blocks // height][x * blocks // width]
            shade = (x + y) * 64 // (width + height)  # 0..63: a gradient, so no block is flat
            rows += bytes(((r + shade) % 256, (g + 2 * shade) % 256, (b + 3 * shade) % 256))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (
        _PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def wav(
    seconds: float = 1.0,
    sample_rate: int = 16000,
    freq: float = 440.0,
    *,
    amplitude: float = 0.5,
) -> bytes:
    """A mono 16-bit PCM WAV of a sine tone at ``freq`` Hz (silence when ``freq`` is 0)."""
    if seconds <= 0 or sample_rate < 1:
        raise ValueError("seconds and sample_rate must be positive")
    n = round(seconds * sample_rate)
    peak = max(0.0, min(1.0, amplitude)) * 32767
    step = 2 * math.pi * freq / sample_rate
    frames = struct.pack(f"<{n}h", *(round(peak * math.sin(step * i)) for i in range(n)))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(frames)
    return buf.getvalue()


def b64(data: bytes) -> str:
    """Base64 text of ``data`` (what ``input_audio.data`` carries)."""
    return base64.b64encode(data).decode("ascii")


def data_url(data: bytes, mime: str = "image/png") -> str:
    """``data:<mime>;base64,...`` for ``data``."""
    return f"data:{mime};base64,{b64(data)}"
