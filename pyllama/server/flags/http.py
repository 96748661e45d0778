"""llama-server's HTTP options: ``--api-prefix``, ``--path`` (static files),
``--threads-http``, ``--sse-ping-interval``, ``--reuse-port``, the web UI's
``--ui-config(-file)``; and the request defaults the command line sets (``--no-cache-prompt``,
``-r``, ``-sp``, ``--embd-normalize``, ``--reasoning-*``, ``--skip-chat-parsing`` ...).
Standard library only."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from pyllama.server.flags.paths import is_dir, read_text
from pyllama.server.flags.table import FlagTable, env_bool

__all__ = ["add_http_flags", "http_options", "unescape"]


def add_http_flags(t: FlagTable) -> None:
    flag, switch = t.flag, t.switch
    t.section("common")
    switch(
        ["-e", "--escape"],
        ["--no-escape"],
        "escape",
        None,
        r"process escapes (\n, \r, \t, \', \", \\) in -r and --dry-sequence-breaker (default: on)",
    )
    t.section("server")
    flag(
        "--reuse-port",
        action="store_true",
        env="LLAMA_ARG_REUSE_PORT",
        conv=env_bool,
        help="let several servers bind the same port (SO_REUSEPORT)",
    )
    flag(
        "--path",
        dest="static_path",
        env="LLAMA_ARG_STATIC_PATH",
        metavar="PATH",
        help="serve static files from this directory (default: none)",
    )
    flag(
        "--api-prefix",
        default="",
        env="LLAMA_ARG_API_PREFIX",
        metavar="PREFIX",
        help="path prefix every route is served under, without the trailing slash",
    )
    flag(
        "--ui-config",
        "--webui-config",
        dest="ui_config",
        env="LLAMA_ARG_UI_CONFIG",
        metavar="JSON",
        help="the chat page's defaults, as a JSON object with llama-server's UI keys (theme, "
        "systemMessage, temperature, top_k, max_tokens ...; the page lists those it does not "
        "use), reported by /props as ui_settings",
    )
    flag(
        "--ui-config-file",
        "--webui-config-file",
        dest="ui_config_file",
        env="LLAMA_ARG_UI_CONFIG_FILE",
        metavar="PATH",
        help="the same, from a JSON file",
    )
    flag(
        "--sse-ping-interval",
        type=int,
        default=30,
        env="LLAMA_ARG_SSE_PING_INTERVAL",
        metavar="N",
        help="seconds of silence in a stream before an SSE ping (-1: never)",
    )
    flag(
        "--threads-http",
        type=int,
        default=-1,
        env="LLAMA_ARG_THREADS_HTTP",
        metavar="N",
        help="worker threads for blocking request work (uvicorn serves HTTP on one event "
        "loop; -1: Python's default)",
    )
    switch(
        ["--cache-prompt"],
        ["--no-cache-prompt"],
        "cache_prompt",
        "LLAMA_ARG_CACHE_PROMPT",
        "reuse the KV cache of earlier prompts (default: on; a request's cache_prompt wins)",
    )
    flag(
        "-r",
        "--reverse-prompt",
        action="append",
        default=[],
        metavar="PROMPT",
        help="a stop string for requests that give none",
    )
    flag("-sp", "--special", action="store_true", help="write special tokens in the output")
    flag(
        "--embd-normalize",
        type=int,
        default=2,
        metavar="N",
        help="embedding normalisation (-1 none, 0 max abs int16, 1 taxicab, 2 euclidean, >2 p-norm)",
    )
    flag(
        "--kv-unified-per-slot",
        type=int,
        env="LLAMA_ARG_KV_UNIFIED_PER_SLOT",
        metavar="N",
        help="context limit per slot; without -c the KV cache holds n_parallel * N",
    )
    flag(
        "--reasoning-effort",
        default="default",
        env="LLAMA_ARG_REASONING_EFFORT",
        metavar="LEVEL",
        help="reasoning_effort for the chat template ('default': its own)",
    )
    flag(
        "--reasoning-budget",
        type=int,
        default=-1,
        env="LLAMA_ARG_THINK_BUDGET",
        metavar="N",
        help="token budget for thinking: -1 unrestricted, 0 ends it at once, N > 0 tokens",
    )
    flag(
        "--reasoning-budget-message",
        env="LLAMA_ARG_THINK_BUDGET_MESSAGE",
        metavar="MESSAGE",
        help="message before the end-of-thinking tag when the budget runs out",
    )
    switch(
        ["--reasoning-preserve"],
        ["--no-reasoning-preserve"],
        "reasoning_preserve",
        "LLAMA_ARG_REASONING_PRESERVE",
        "preserve_reasoning for templates that support it",
    )
    switch(
        ["--skip-chat-parsing"],
        ["--no-skip-chat-parsing"],
        "skip_chat_parsing",
        "LLAMA_ARG_SKIP_CHAT_PARSING",
        "reasoning and tool calls stay in the content",
    )
    flag("--log-prompts-dir", metavar="PATH", help="write each rendered prompt to this directory")
    flag(
        "--video-fps",
        type=float,
        default=4.0,
        env="LLAMA_ARG_VIDEO_FPS",
        metavar="N",
        help="target video frame rate (default: 4.0; <= 0: the video's own); videos are "
        "decoded with ffmpeg",
    )
    flag(
        "--video-timestamp-interval",
        type=int,
        default=5000,
        env="LLAMA_ARG_VIDEO_TIMESTAMP_INTERVAL",
        metavar="N",
        help="interval in milliseconds between text timestamps (default: 5000; <= 0: none)",
    )
    flag(
        "--video-ffmpeg-dir",
        env="LLAMA_ARG_VIDEO_FFMPEG_DIR",
        metavar="DIR",
        help="path to the directory containing ffmpeg and ffprobe (default: search in PATH)",
    )


def unescape(value: str) -> str:
    out, i = [], 0
    table = {"n": "\n", "r": "\r", "t": "\t", "'": "'", '"': '"', "\\": "\\"}
    while i < len(value):
        c = value[i]
        if c == "\\" and i + 1 < len(value) and value[i + 1] in table:
            out.append(table[value[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _ui_config(a: argparse.Namespace) -> dict[str, object] | None:
    text = a.ui_config
    if a.ui_config_file:
        text = read_text(a.ui_config_file, "--ui-config-file")
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"--ui-config: not JSON: {e}") from e
    if not isinstance(value, dict):
        raise ValueError("--ui-config must be a JSON object")
    return value


def _program(path: str) -> bool:
    if os.name == "nt":
        path += ".exe"  # as mtmd-helper's video_resolve_bin names it there
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _video_flags(a: argparse.Namespace) -> None:
    if not math.isfinite(a.video_fps):
        raise ValueError(f"--video-fps must be a finite number, got {a.video_fps}")
    d = a.video_ffmpeg_dir
    if d is None:
        return
    if not is_dir(d):
        raise ValueError(f"--video-ffmpeg-dir: not a directory: {d}")
    missing = [n for n in ("ffmpeg", "ffprobe") if not _program(os.path.join(d, n))]
    if missing:
        raise ValueError(f"--video-ffmpeg-dir: no {' and no '.join(missing)} program in {d}")


def http_options(a: argparse.Namespace) -> dict[str, object]:
    """Settings fields; ValueError names a bad option."""
    prefix = a.api_prefix.rstrip("/")
    if prefix and not prefix.startswith("/"):
        raise ValueError(f"--api-prefix must start with '/', got '{a.api_prefix}'")
    if a.static_path is not None and not is_dir(a.static_path):
        raise ValueError(f"--path: not a directory: {a.static_path}")
    _video_flags(a)
    if a.reasoning_budget < -1:
        raise ValueError("--reasoning-budget: invalid value (-1, 0 or more)")
    if a.log_prompts_dir:  # made at start, as llama-server; a failure only warns
        try:
            os.makedirs(a.log_prompts_dir, exist_ok=True)
        except OSError as e:
            print(
                f"warning: failed to create prompts-log-dir '{a.log_prompts_dir}': {e.strerror}",
                file=sys.stderr,
            )
    if a.kv_unified_per_slot is not None and a.kv_unified_per_slot < 1:
        raise ValueError("--kv-unified-per-slot must be >= 1")
    if a.embd_normalize < -1:
        raise ValueError("--embd-normalize must be >= -1")
    escape = a.escape is not False
    stops = [unescape(s) if escape else s for s in a.reverse_prompt]
    kwargs: dict[str, object] = {}
    if a.reasoning_effort != "default":
        kwargs["reasoning_effort"] = a.reasoning_effort
    if a.reasoning_preserve is not None:
        kwargs["preserve_reasoning"] = bool(a.reasoning_preserve)
    return {
        "api_prefix": prefix,
        "static_path": a.static_path,
        "reuse_port": bool(a.reuse_port),
        "ui_config": _ui_config(a),
        "sse_ping_interval": a.sse_ping_interval,
        "reasoning_budget": a.reasoning_budget,
        "reasoning_budget_message": a.reasoning_budget_message or "",
        "threads_http": a.threads_http,
        "cache_prompt": a.cache_prompt is not False,
        "stop_words": stops,
        "special": bool(a.special),
        "embd_normalize": a.embd_normalize,
        "kv_unified_per_slot": a.kv_unified_per_slot,
        "skip_chat_parsing": bool(a.skip_chat_parsing),
        "log_prompts_dir": a.log_prompts_dir,
        "template_kwarg_defaults": kwargs,
        "escape": escape,
        "video_fps": a.video_fps,
        "video_timestamp_interval_ms": a.video_timestamp_interval,
        "video_ffmpeg_dir": a.video_ffmpeg_dir,
    }
