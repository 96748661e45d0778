"""What a media file is, by its first bytes, in the order llama.cpp's
``mtmd_helper_bitmap_init_from_buf`` tries them: audio (miniaudio: WAV, MP3, FLAC), then an
image stb_image reads (its format tests), then WebP (decoded by ffmpeg as one still frame),
then anything else: a video for ffmpeg. The kind decides the path, not the content part's
type: llama-server decodes a video sent as ``image_url`` as a video, and a PNG sent as
``input_video`` as an image."""

from __future__ import annotations

from typing import Literal

__all__ = ["Kind", "kind"]

Kind = Literal["audio", "image", "webp", "other"]


def _audio(b: bytes) -> bool:  # mtmd-helper's is_audio_file
    if len(b) < 12:
        return False
    wav = b[:4] == b"RIFF" and b[8:12] == b"WAVE"
    mp3 = b[:3] == b"ID3" or (b[0] == 0xFF and (b[1] & 0xE0) == 0xE0)
    return wav or mp3 or b[:4] == b"fLaC"


def _tga(b: bytes) -> bool:  # stb_image's stbi__tga_test
    if len(b) < 18:
        return False
    color, kind = b[1], b[2]
    if color > 1:
        return False
    if color == 1:
        if kind not in (1, 9) or b[7] not in (8, 15, 16, 24, 32):
            return False
    elif kind not in (2, 3, 10, 11):
        return False
    width, height, bpp = (
        int.from_bytes(b[12:14], "little"),
        int.from_bytes(b[14:16], "little"),
        b[16],
    )
    if width < 1 or height < 1:
        return False
    if color == 1 and bpp not in (8, 16):
        return False
    return bpp in (8, 15, 16, 24, 32)


def _stb_image(b: bytes) -> bool:
    return (
        b[:3] == b"\xff\xd8\xff"  # JPEG
        or b[:8] == b"\x89PNG\r\n\x1a\n"
        or b[:2] == b"BM"
        or b[:6] in (b"GIF87a", b"GIF89a")
        or b[:4] == b"8BPS"  # PSD
        or (b[:4] == b"\x53\x80\xf6\x34" and b[88:92] == b"PICT")  # Softimage PIC
        or b[:2] in (b"P5", b"P6")  # PNM
        or b.startswith((b"#?RADIANCE\n", b"#?RGBE\n"))  # HDR
        or _tga(b)
    )


def kind(data: bytes) -> Kind:
    if _audio(data):
        return "audio"
    if _stb_image(data):
        return "image"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return "other"
