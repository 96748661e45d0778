"""Video in chat content (``input_video``), decoded with ffmpeg as llama-server decodes it:
frames at ``--video-fps``, ``Video:`` before them and a ``[XmY.YYs]`` timestamp after the
frame at each ``--video-timestamp-interval``, the programs from ``--video-ffmpeg-dir`` or
PATH. The videos are made by ffmpeg itself (lavfi's testsrc); the model is the tiny vision
fixture (16 tokens an image). Against llama-server built from the same tree, the same
requests give the same prompt token counts and the same greedy replies."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.media import b64, data_url, png
from helpers.peer import require_peer, running_peer
from helpers.servers import PYLLAMA_SERVER, running_server

SERVER = ["-c", "4096", "-np", "1", "-t", "2"]


def _make(ffmpeg: str, out: Path, source: str, *codec: str) -> bytes:
    cmd = [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", source, *codec, str(out)]
    subprocess.run(cmd, check=True, timeout=120)
    return out.read_bytes()


@pytest.fixture(scope="module")
def videos(ffmpeg: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("videos")
    return {
        # 3 s at 10 fps, 64x48: 3 frames at --video-fps 1, 6 at 2
        "mp4": _make(ffmpeg, d / "a.mp4", "testsrc=duration=3:size=64x48:rate=10", "-c:v", "mpeg4"),
        "avi": _make(ffmpeg, d / "b.avi", "testsrc=duration=2:size=40x40:rate=5", "-c:v", "mjpeg"),
        "webp": _make(ffmpeg, d / "c.webp", "testsrc=duration=0.1:size=48x32:rate=10", "-frames:v", "1"),
    }  # fmt: skip


def _args(tiny_vlm: dict[str, Path], *flags: str) -> list[str]:
    return ["-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj"]), *SERVER, *flags]


def _part(data: bytes, kind: str = "input_video") -> dict:
    if kind == "image_url":
        return {"type": "image_url", "image_url": {"url": data_url(data)}}
    return {"type": kind, kind: {"data": b64(data)}}


def _chat(url: str, *parts: dict, status: int = 200, **extra: object) -> dict:
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Describe."}, *parts]}],
        "max_tokens": 6,
        "temperature": 0,
        **extra,
    }
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == status, r.text
    return r.json()


def _prompt_tokens(url: str, *parts: dict) -> int:
    return _chat(url, *parts)["usage"]["prompt_tokens"]


@pytest.fixture(scope="module")
def servers(tiny_vlm: dict[str, Path], ffmpeg: str) -> Iterator[dict[str, str]]:
    """pyllama-servers by their video flags."""
    configs = {
        "fps1": ["--video-fps", "1", "--video-timestamp-interval", "0"],
        "fps2": ["--video-fps", "2", "--video-timestamp-interval", "0"],
        "fps2-ts1000": ["--video-fps", "2", "--video-timestamp-interval", "1000"],
    }
    with (
        running_server(*_args(tiny_vlm, *configs["fps1"])) as a,
        running_server(*_args(tiny_vlm, *configs["fps2"])) as b,
        running_server(*_args(tiny_vlm, *configs["fps2-ts1000"])) as c,
    ):
        yield {"fps1": a, "fps2": b, "fps2-ts1000": c}


def _verbose_prompt(url: str, *parts: dict) -> str:
    return _chat(url, *parts, verbose=True)["__verbose"]["prompt"]


def _frame_text(url: str) -> str:
    """What one image leaves in a result's ``prompt``: as llama-server's, the prompt's text
    tokens with specials written out and the media embeddings left out."""
    text = _verbose_prompt(url, _part(png(64, 48), "image_url"))
    frame = text.split("Describe.", 1)[1].split("<|im_end|>", 1)[0]
    assert frame  # <start_of_image><end_of_image> for the tiny fixture
    return frame


@pytest.mark.flag_effect("--video-fps")
def test_video_fps_sets_the_frames(servers: dict[str, str], videos: dict[str, bytes]) -> None:
    """3 s of video: 3 frames at 1 fps, 6 at 2; each frame costs what one image costs."""
    one, two = servers["fps1"], servers["fps2"]
    image = _part(png(64, 48), "image_url")
    per_image = _prompt_tokens(one, image, image) - _prompt_tokens(one, image)
    assert per_image > 16  # 16 embeddings and the <start_of_image>/<end_of_image> text
    at1, at2 = _prompt_tokens(one, _part(videos["mp4"])), _prompt_tokens(two, _part(videos["mp4"]))
    assert at2 - at1 == 3 * per_image
    frame = _frame_text(one)
    assert "Describe.Video:" + frame * 3 + "<|im_end|>" in _verbose_prompt(
        one, _part(videos["mp4"])
    )


@pytest.mark.flag_effect("--video-timestamp-interval")
def test_video_timestamps(servers: dict[str, str], videos: dict[str, bytes]) -> None:
    """Every 1000 ms at 2 fps: a timestamp after frames 0, 2 and 4 (0.0, 1.0, 2.0 s)."""
    url = servers["fps2-ts1000"]
    m = _frame_text(url)
    expect = f"Video:{m}[0m0.00s]{m}{m}[0m1.00s]{m}{m}[0m2.00s]{m}<|im_end|>"
    assert expect in _verbose_prompt(url, _part(videos["mp4"]))
    stamps = 0
    for text in ("[0m0.00s]", "[0m1.00s]", "[0m2.00s]"):
        r = httpx.post(url + "/tokenize", json={"content": text}, timeout=30)
        stamps += len(r.json()["tokens"])
    with_stamps = _prompt_tokens(url, _part(videos["mp4"]))
    assert with_stamps - _prompt_tokens(servers["fps2"], _part(videos["mp4"])) == stamps > 0


def test_video_is_what_the_bytes_are(servers: dict[str, str], videos: dict[str, bytes]) -> None:
    """As llama-server: a video sent as image_url or video_url is read as a video, an
    image sent as input_video as an image."""
    url = servers["fps1"]
    as_video = _prompt_tokens(url, _part(videos["mp4"]))
    assert _prompt_tokens(url, _part(videos["mp4"], "image_url")) == as_video
    url_part = {"type": "video_url", "video_url": {"url": data_url(videos["mp4"], "video/mp4")}}
    assert _prompt_tokens(url, url_part) == as_video
    image = png(64, 48, seed=5)
    assert _prompt_tokens(url, _part(image)) == _prompt_tokens(url, _part(image, "image_url"))
    # a WebP image: one still frame through ffmpeg, no "Video:" text
    assert _prompt_tokens(url, _part(videos["webp"], "image_url")) == _prompt_tokens(
        url, _part(image, "image_url")
    )


def test_bad_video(servers: dict[str, str]) -> None:
    body = _chat(servers["fps1"], _part(b"not a video, an image or a sound" * 8), status=400)
    assert "media 0 could not be decoded as an image, audio or video" in body["error"]["message"]


def test_video_needs_vision(tiny_vlm: dict[str, Path], videos: dict[str, bytes]) -> None:
    args = ["-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj_audio"]), *SERVER]
    with running_server(*args) as url:
        assert httpx.get(url + "/props").json()["modalities"]["video"] is False
        body = _chat(url, _part(videos["mp4"]), status=400)
        assert body["error"]["message"].startswith("video input is not supported")


@pytest.mark.flag_effect("--video-ffmpeg-dir")
def test_ffmpeg_dir_without_ffmpeg_stops_the_start(
    tiny_vlm: dict[str, Path], tmp_path: Path
) -> None:
    """pyllama refuses the flag at start-up; llama-server starts and then answers each
    video with 400 "Failed to load image or audio file"."""
    cmd = [*PYLLAMA_SERVER, *_args(tiny_vlm, "--video-ffmpeg-dir", str(tmp_path))]
    # from outside the checkout: its source tree has no compiled module
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0
    assert f"--video-ffmpeg-dir: no ffmpeg and no ffprobe program in {tmp_path}" in r.stderr


@pytest.mark.flag_effect("--video-ffmpeg-dir")
def test_ffmpeg_dir_names_the_programs(
    tiny_vlm: dict[str, Path], videos: dict[str, bytes], ffmpeg: str, tmp_path: Path
) -> None:
    """With no ffmpeg on PATH, video works only from the directory the flag names."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("ffmpeg", "ffprobe"):
        (tools / name).symlink_to(Path(ffmpeg).with_name(name).resolve())
    env = {"PATH": str(tmp_path / "nothing-here")}
    with running_server(*_args(tiny_vlm), env=env) as url:
        assert httpx.get(url + "/props").json()["modalities"]["video"] is False
        message = _chat(url, _part(videos["mp4"]), status=400)["error"]["message"]
        assert "ffmpeg and ffprobe programs: not found on PATH (--video-ffmpeg-dir" in message
    with running_server(*_args(tiny_vlm, "--video-ffmpeg-dir", str(tools)), env=env) as url:
        assert httpx.get(url + "/props").json()["modalities"]["video"] is True
        assert _chat(url, _part(videos["mp4"]))["usage"]["prompt_tokens"] > 100
    assert os.environ.get("PATH")  # the test process's own PATH is left alone


def _replies(url: str, videos: dict[str, bytes]) -> list[tuple[int, str]]:
    out = []
    for part in (
        _part(videos["mp4"]),
        _part(videos["avi"], "video_url"),
        _part(videos["mp4"], "image_url"),
        _part(videos["webp"], "image_url"),
    ):
        d = _chat(url, part)
        out.append((d["usage"]["prompt_tokens"], d["choices"][0]["message"]["content"]))
    return out


@pytest.mark.flag_effect("--video-fps", "--video-timestamp-interval")
@pytest.mark.parametrize(
    "flags",
    [
        [],  # llama-server's defaults: 4 fps, a timestamp every 5000 ms
        ["--video-fps", "1", "--video-timestamp-interval", "1000"],
        ["--video-fps", "0", "--video-timestamp-interval", "700"],  # the video's own rate
        ["--video-fps", "0.3", "--video-timestamp-interval", "0"],
    ],
)
def test_video_equals_llama_server(
    tiny_vlm: dict[str, Path], videos: dict[str, bytes], flags: list[str]
) -> None:
    require_peer()
    with running_server(*_args(tiny_vlm, *flags)) as url:
        ours = _replies(url, videos)
    with running_peer(*_args(tiny_vlm, *flags)) as url:
        theirs = _replies(url, videos)
    assert ours == theirs
