"""Video in chat content, decoded as llama.cpp's mtmd-helper decodes it (``mtmd_helper_video``
in tools/mtmd/mtmd-helper.cpp), with the ffmpeg and ffprobe binaries (``--video-ffmpeg-dir``,
else PATH): ffprobe reads the first video stream's size and frame rate, ffmpeg resamples it
to ``--video-fps`` frames a second (the stream's own rate when <= 0) as raw RGB. The video
stands in the prompt as llama.cpp's lazy bitmap expands it: the text ``Video:``, then each
frame, and after the frame at each ``--video-timestamp-interval`` ms of elapsed time (the
first included; <= 0: never) a ``[XmY.YYs]`` text. Each frame goes through the image path
as a PPM file. A WebP image is decoded by ffmpeg as one still frame, as llama.cpp does.

pyllama's engine builds libmtmd without ``MTMD_VIDEO``, so this runs in Python, before the
projector sees the frames. Two differences from llama.cpp's in-engine expansion: its text
pieces are tokenized with the prompt text around them here (llama.cpp tokenizes each on its
own: the same tokens wherever the pre-tokenizer splits there, as it does at ``Video:`` and
``[``), and frames are plain images, never merged in pairs (Qwen-VL projectors merge two
consecutive frames of one video: ``clip_model_n_temporal_merge``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from dataclasses import dataclass

import numpy as np

from pyllama.server.http.errors import APIError

__all__ = ["MAX_FRAME_BYTES", "VideoOptions", "find_tools", "still", "timestamps", "video_prompt"]

MAX_FRAME_BYTES = 512 << 20  # a video's decoded RGB frames, all together
PROMPT_START = "Video:"  # mtmd_helper_video::prompt_start


@dataclass(frozen=True)
class VideoOptions:
    fps: float = 4.0  # --video-fps
    timestamp_interval_ms: int = 5000  # --video-timestamp-interval
    ffmpeg_dir: str | None = None  # --video-ffmpeg-dir; None: PATH


def _in_dir(directory: str, name: str) -> str | None:
    # ffmpeg.exe on Windows, as mtmd-helper's video_resolve_bin names it there
    path = os.path.join(directory, name + (".exe" if os.name == "nt" else ""))
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def find_tools(ffmpeg_dir: str | None) -> tuple[str, str] | None:
    """(ffmpeg, ffprobe) in ``ffmpeg_dir``, else on PATH; None when either is missing."""
    if ffmpeg_dir:
        ffmpeg, ffprobe = _in_dir(ffmpeg_dir, "ffmpeg"), _in_dir(ffmpeg_dir, "ffprobe")
    else:
        ffmpeg, ffprobe = shutil.which("ffmpeg"), shutil.which("ffprobe")
    return (ffmpeg, ffprobe) if ffmpeg and ffprobe else None


def _tools(opts: VideoOptions, what: str, before: str = "") -> tuple[str, str]:
    tools = find_tools(opts.ffmpeg_dir)
    if tools is None:
        where = f"in --video-ffmpeg-dir {opts.ffmpeg_dir}" if opts.ffmpeg_dir else "on PATH"
        raise APIError(
            400,
            f"{before}{what} needs the ffmpeg and ffprobe programs: not found {where} "
            "(--video-ffmpeg-dir names their directory)",
        )
    return tools


@dataclass(frozen=True)
class _Probe:
    width: int
    height: int
    fps: float  # the stream's frame rate


def _rational(s: str) -> float:  # mtmd_helper_video::parse_rational, in float
    num, sep, den = s.partition("/")
    f32 = np.float32
    try:
        if sep:
            return float(f32(int(num)) / f32(int(den))) if int(den) > 0 else 0.0
        return float(f32(float(s)))
    except ValueError:
        return 0.0


async def _run(cmd: list[str], data: bytes, out_limit: int) -> tuple[bytes, bytes, int | None]:
    """(stdout, stderr tail, exit status) of ``cmd`` fed ``data``; stdout beyond
    ``out_limit`` bytes stops it (status None)."""
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout and proc.stderr

    async def feed() -> None:
        assert proc.stdin
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(data)
            await proc.stdin.drain()
        proc.stdin.close()  # ffmpeg may stop reading early (ffprobe had its metadata)

    feeder = asyncio.ensure_future(feed())
    errors = asyncio.ensure_future(proc.stderr.read(64 << 10))
    out = bytearray()
    try:
        while chunk := await proc.stdout.read(1 << 20):
            out += chunk
            if len(out) > out_limit:
                return bytes(out), b"", None
        await feeder
        status = await proc.wait()
        return bytes(out), await errors, status
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        feeder.cancel()
        errors.cancel()


def _undecodable(index: int, why: str) -> APIError:
    return APIError(400, f"media {index} could not be decoded as an image, audio or video: {why}")


async def _probe(ffprobe: str, data: bytes, index: int) -> _Probe:
    cmd = [
        ffprobe, "-v", "quiet",
        "-show_entries", "stream=width,height,r_frame_rate,nb_frames,duration",
        "-select_streams", "v:0",
        "-of", "default=noprint_wrappers=1",
        "pipe:0",
    ]  # fmt: skip
    out, _, _ = await _run(cmd, data, 1 << 20)
    fields: dict[str, str] = {}
    for line in out.decode("utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in fields:
            fields[key] = value.strip()
    try:
        width, height = int(fields.get("width", "0")), int(fields.get("height", "0"))
    except ValueError:
        width = height = 0
    fps = _rational(fields.get("r_frame_rate", "0"))
    if width <= 0 or height <= 0 or fps <= 0:
        raise _undecodable(index, "ffprobe found no video stream in it")
    return _Probe(width, height, fps)


async def _frames(
    ffmpeg: str, data: bytes, probe: _Probe, fps: float | None, index: int
) -> list[bytes]:
    """The frames as raw RGB, at ``fps`` (None: every frame, no fps filter)."""
    cmd = [ffmpeg, "-nostdin", "-read_ahead_limit", "-1", "-i", "cache:pipe:0"]
    if fps is not None:
        cmd += ["-vf", f"fps={fps:.6f}"]
    cmd += ["-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1", "-loglevel", "error"]
    out, err, status = await _run(cmd, data, MAX_FRAME_BYTES)
    if status is None:
        raise APIError(
            400,
            f"media {index}: the video's frames at --video-fps {fps} take more than "
            f"{MAX_FRAME_BYTES >> 20} MiB decoded: send a shorter or smaller video",
        )
    size = probe.width * probe.height * 3
    frames = [out[i : i + size] for i in range(0, len(out) - size + 1, size)]
    if not frames:
        why = err.decode("utf-8", errors="replace").strip().splitlines()
        raise _undecodable(index, f"ffmpeg gave no frame ({why[-1] if why else 'no output'})")
    return frames


def _ppm(probe: _Probe, rgb: bytes) -> bytes:
    return b"P6\n%d %d\n255\n" % (probe.width, probe.height) + rgb


def timestamps(n_frames: int, fps: float, interval_ms: int) -> list[str | None]:
    """Per frame, the text that follows it (None: none), in llama.cpp's float arithmetic:
    ``[%dm%.2fs]`` of the frame's time when it reaches the next multiple of the interval."""
    out: list[str | None] = [None] * n_frames
    if interval_ms <= 0:
        return out
    f32 = np.float32
    rate, step, thousand, sixty = f32(fps), f32(interval_ms), f32(1000.0), f32(60.0)
    next_ms = f32(0.0)
    for i in range(n_frames):
        elapsed_ms = f32(f32(i) / rate) * thousand
        if elapsed_ms >= next_ms:
            elapsed_s = f32(elapsed_ms / thousand)
            minutes = int(f32(elapsed_s / sixty))
            seconds = f32(elapsed_s - f32(minutes) * sixty)
            out[i] = f"[{minutes}m{float(seconds):.2f}s]"
            next_ms = f32(next_ms + step)
    return out


async def video_prompt(
    data: bytes, opts: VideoOptions, marker: str, index: int
) -> tuple[str, list[bytes]]:
    """(the text that stands for the video, holding one ``marker`` per frame; the frames as
    image files)."""
    # only bytes that are neither an image nor audio get here: without the tools they may
    # be a video or nothing at all, and the message says both
    before = f"media {index} could not be decoded as an image or audio; "
    ffmpeg, ffprobe = _tools(opts, "video input", before)
    probe = await _probe(ffprobe, data, index)
    fps = float(np.float32(opts.fps)) if opts.fps > 0 else probe.fps
    frames = await _frames(ffmpeg, data, probe, fps, index)
    text = PROMPT_START
    for stamp in timestamps(len(frames), fps, opts.timestamp_interval_ms):
        text += marker + (stamp or "")
    return text, [_ppm(probe, f) for f in frames]


async def still(data: bytes, opts: VideoOptions, index: int) -> bytes:
    """A WebP image's first frame, as an image file (ffmpeg without the fps filter)."""
    ffmpeg, ffprobe = _tools(opts, "a WebP image")
    probe = await _probe(ffprobe, data, index)
    return _ppm(probe, (await _frames(ffmpeg, data, probe, None, index))[0])
