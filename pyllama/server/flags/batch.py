"""pyllama's flags for OpenAI's Files and Batch API (``/v1/files``, ``/v1/batches``):
where files and batch state live, the upload limits (OpenAI's by default), how many lines
run at once and how long a batch may take. llama-server has no batch API."""

from __future__ import annotations

import argparse

from pyllama.server.flags.table import FlagTable
from pyllama.server.settings import DAY, BatchOptions

__all__ = ["add_batch_flags", "batch_options"]


def add_batch_flags(t: FlagTable) -> None:
    flag, switch = t.flag, t.switch
    t.section("pyllama")
    switch(
        ["--batch"],
        ["--no-batch"],
        "batch",
        "PYLLAMA_BATCH",
        "pyllama: serve OpenAI's Files and Batch API, /v1/files and /v1/batches (default: on)",
    )
    flag(
        "--batch-dir",
        env="PYLLAMA_BATCH_DIR",
        metavar="DIR",
        help="pyllama: where batch files and state are kept, across restarts; one server a "
        "directory (default: batches/PORT in pyllama's cache)",
    )
    flag(
        "--batch-max-file-mib",
        type=int,
        default=200,
        env="PYLLAMA_BATCH_MAX_FILE_MIB",
        help="pyllama: largest file /v1/files takes, MiB (default: 200, as OpenAI)",
    )
    flag(
        "--batch-max-lines",
        type=int,
        default=50_000,
        env="PYLLAMA_BATCH_MAX_LINES",
        help="pyllama: most requests in one batch file (default: 50000, as OpenAI)",
    )
    flag(
        "--batch-parallel",
        type=int,
        default=0,
        env="PYLLAMA_BATCH_PARALLEL",
        help="pyllama: batch requests run at once (default: 0, half the slots)",
    )
    flag(
        "--batch-priority",
        type=int,
        default=100,
        env="PYLLAMA_BATCH_PRIORITY",
        help="pyllama: admission priority of batch lines, lower first; a request's own "
        "`priority` is 0 unless it says (default: 100, after interactive requests)",
    )
    flag(
        "--batch-window",
        type=int,
        default=DAY,
        env="PYLLAMA_BATCH_WINDOW",
        metavar="SECONDS",
        help="pyllama: how long a batch may run before it expires (default: 86400, OpenAI's 24h)",
    )


def batch_options(a: argparse.Namespace, parser: argparse.ArgumentParser) -> BatchOptions:
    for name, value in (
        ("--batch-max-file-mib", a.batch_max_file_mib),
        ("--batch-max-lines", a.batch_max_lines),
        ("--batch-window", a.batch_window),
    ):
        if value < 1:
            parser.error(f"{name} must be at least 1")
    if a.batch_parallel < 0:
        parser.error("--batch-parallel must be 0 (half the slots) or more")
    return BatchOptions(
        enabled=a.batch is not False,
        dir=a.batch_dir,
        max_file_bytes=a.batch_max_file_mib << 20,
        max_lines=a.batch_max_lines,
        parallel=a.batch_parallel,
        window_seconds=a.batch_window,
        priority=a.batch_priority,
    )
