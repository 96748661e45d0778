"""Bad media are a 400 in the protocol's error shape, before any streamed byte, and the
server goes on serving (RELIABILITY: hostile input loses nothing): undecodable or
truncated files, a 20,000-pixel-wide image, base64 that does not decode, URLs to private
addresses or outside --media-path, more images than the context holds, and media sent to
a model without a projector (llama-server's message)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.media import b64, data_url, png, wav
from helpers.servers import running_server


def _huge_png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    rows = (b"\x00" + b"\x00" * 3 * width) * height
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def _chat(url: str, part: dict, *, stream: bool = False, n: int = 1) -> httpx.Response:
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, *([part] * n)]}],
        "max_tokens": 4,
        "stream": stream,
    }
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=60)


def _image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


BAD_IMAGES = {
    "not an image": (data_url(b"hello, I am not a picture"), "could not be decoded"),
    "truncated png": (data_url(png(64, 64, seed=2)[:200]), "could not be decoded"),
    "20000 pixels wide": (data_url(_huge_png(20000, 4)), "20000x4 pixels"),
    "bad base64": ("data:image/png;base64,@@@@not-base64@@@@", "Invalid base64"),
    "bad raw base64": ("%%%%", "Invalid base64"),
    "not base64 encoded": ("data:image/png,rawbytes", "must be base64"),
    "not a media uri": ("data:text/plain;base64,aGVsbG8=", "Invalid uri format"),
    "private address": ("http://127.0.0.1:9/cat.png", "private or local address"),
    "link-local metadata": ("http://169.254.169.254/latest/meta-data", "private or local address"),
    "file without media path": ("file://cat.png", "--media-path"),
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
def test_bad_image_is_400(omni_server: str, case: str, stream: bool) -> None:
    url, message = BAD_IMAGES[case]
    r = _chat(omni_server, _image(url), stream=stream)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/json")  # not a started stream
    assert message in r.json()["error"]["message"]


def test_bad_audio_is_400(omni_server: str) -> None:
    part = {
        "type": "input_audio",
        "input_audio": {"data": b64(b"RIFF....WAVEfmt garbage"), "format": "wav"},
    }
    r = _chat(omni_server, part)
    assert r.status_code == 400
    assert "could not be decoded" in r.json()["error"]["message"]


def test_too_many_images_for_the_context(omni_server: str) -> None:
    """2048 tokens per server, 2 slots: 1024 per slot; 80 images of 16 tokens do not fit."""
    r = _chat(omni_server, _image(data_url(png(8, 8))), stream=True, n=80)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "exceed_context_size_error"
    assert err["n_prompt_tokens"] > err["n_ctx"]


def test_other_protocols_bad_media(omni_server: str) -> None:
    bad = b64(b"definitely not an image")
    r = httpx.post(
        omni_server + "/v1/messages",
        json={
            "model": "tiny",
            "max_tokens": 4,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": bad},
                        }
                    ],
                }
            ],
        },
    )
    assert r.status_code == 400
    assert r.json()["type"] == "error"  # Anthropic's error shape
    assert "could not be decoded" in r.json()["error"]["message"]
    r = httpx.post(
        omni_server + "/api/chat",
        json={"model": "tiny", "messages": [{"role": "user", "content": "hi", "images": ["!!!"]}]},
    )
    assert r.status_code == 400
    assert "Invalid base64" in r.json()["error"]  # Ollama's error shape
    marker = httpx.get(omni_server + "/props").json()["media_marker"]
    r = httpx.post(
        omni_server + "/completion",
        json={
            "prompt": {"prompt_string": "<__media__>", "multimodal_data": ["%%"]},
            "n_predict": 2,
        },
    )
    assert r.status_code == 400
    r = httpx.post(
        omni_server + "/completion",
        json={
            "prompt": {
                "prompt_string": f"two markers {marker}{marker}",
                "multimodal_data": [b64(png(8, 8))],
            }
        },
    )
    assert r.status_code == 400
    assert "2 media marker(s)" in r.json()["error"]["message"]


def test_marker_text_is_not_a_marker(omni_server: str) -> None:
    """The default marker typed by a client stays text: the server's marker is random."""
    r = httpx.post(
        omni_server + "/completion",
        json={"prompt": {"prompt_string": "<__media__>", "multimodal_data": [b64(png(8, 8))]}},
    )
    assert r.status_code == 400
    assert "0 media marker(s)" in r.json()["error"]["message"]
    chat = _chat(omni_server, {"type": "text", "text": "<__media__> is just text"})
    assert chat.status_code == 200


def test_server_keeps_serving(omni_server: str) -> None:
    for url, _ in BAD_IMAGES.values():
        assert _chat(omni_server, _image(url)).status_code == 400
    ok = _chat(omni_server, _image(data_url(png(16, 16, seed=9))))
    assert ok.status_code == 200
    assert httpx.get(omni_server + "/health").json() == {"status": "ok"}


@pytest.fixture(scope="module")
def media_server(
    tiny_vlm: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """The vision projector alone, with a --media-path folder."""
    media = tmp_path_factory.mktemp("media")
    (media / "cat.png").write_bytes(png(32, 32, seed=5))
    (media / "sub").mkdir()
    (media / "sub" / "dog.png").write_bytes(png(32, 32, seed=6))
    (media.parent / "secret.png").write_bytes(png(32, 32, seed=5))
    with running_server(
        "-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj"]),
        "-c", "1024", "-np", "1", "--media-path", str(media),
    ) as url:  # fmt: skip
        yield url, media


@pytest.mark.flag_effect("--media-path", "--mmproj")
def test_media_path(media_server: tuple[str, Path]) -> None:  # item 21
    url, _ = media_server
    assert _chat(url, _image("file://cat.png")).status_code == 200
    assert _chat(url, _image("file://sub/dog.png")).status_code == 200
    for path in ("file://../secret.png", "file:///etc/passwd", "file://missing.png", "file://"):
        r = _chat(url, _image(path))
        assert r.status_code == 400, path
    assert "not allowed" in _chat(url, _image("file://../secret.png")).json()["error"]["message"]


def test_audio_to_a_vision_only_model(media_server: tuple[str, Path]) -> None:
    url, _ = media_server
    r = _chat(url, {"type": "input_audio", "input_audio": {"data": b64(wav(0.5)), "format": "wav"}})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("audio input is not supported - hint:")
    assert httpx.get(url + "/props").json()["modalities"]["audio"] is False


def test_media_without_a_projector(tiny_vlm: dict[str, Path]) -> None:
    with running_server("-m", str(tiny_vlm["model"]), "-c", "512", "-np", "1") as url:
        r = _chat(url, _image(data_url(png(8, 8))))
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
        )
        r = httpx.post(
            url + "/completion",
            json={"prompt": {"prompt_string": "<__media__>", "multimodal_data": [b64(png(8, 8))]}},
        )
        assert r.status_code == 400
        assert httpx.get(url + "/props").json()["modalities"] == {
            "vision": False,
            "audio": False,
            "video": False,
        }
        form = httpx.post(url + "/v1/audio/transcriptions", files={"file": ("a.wav", wav(0.5))})
        assert form.status_code == 400
        assert "does not support audio" in form.json()["error"]["message"]
