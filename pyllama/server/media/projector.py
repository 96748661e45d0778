"""The projector (``--mmproj``) loaded for a model, or one line naming the flag and the
projector's own reason when it cannot be: libmtmd reports every failure as "Failed to load
CLIP model", and the reason (``clip_init``'s, quoted in the captured log) or, for a file
that is no projector at all (a text model), nothing."""

from __future__ import annotations

import re
from typing import Any

from pyllama import _core
from pyllama.model_file import FlagFileError, ModelFileError, check_model_file

__all__ = ["load_projector", "projector_reasons"]

_HEAD = re.compile(r"^failed to load the multimodal projector '.*?'(?:: )?")
_CLIP_FAILED = re.compile(r"^failed to load model '.*?'(?:: )?")  # clip_init's, then the reason
_FUNC_PREFIX = re.compile(r"^[A-Za-z_]\w*: ")  # llama.cpp prefixes its lines with __func__
_GENERIC = "Failed to load CLIP model"  # mtmd's line for every failure
_NO_ENCODER = (
    "not a multimodal projector: it has neither a vision nor an audio encoder "
    "(clip.has_vision_encoder, clip.has_audio_encoder)"
)


def _strip(line: str) -> str:
    while m := _FUNC_PREFIX.match(line):
        line = line[m.end() :]
    return line


def projector_reasons(text: str) -> list[str]:
    """The projector's reasons in a failed load's message (the captured log after pyllama's
    head): function prefixes, the generic lines and repeats left out."""
    out: list[str] = []
    for raw in _HEAD.sub("", text, count=1).splitlines():
        line = _strip(_CLIP_FAILED.sub("", _strip(raw.strip())))
        if line and not line.startswith(_GENERIC) and line not in out:
            out.append(line)
    return out


def load_projector(model: _core.Model, path: str, flag: str, **params: Any) -> _core.Projector:
    """``_core.Projector(model, path, **params)``; a failure is a ``FlagFileError`` whose one
    line names ``flag``, the file and why (the server then exits 2, as for a bad flag)."""
    head = f"{flag} {path}: "
    try:
        check_model_file(path)
    except ModelFileError as e:  # "cannot load model PATH: why"
        raise FlagFileError(head + str(e).split(f"{path}: ", 1)[-1]) from None
    try:
        return _core.Projector(model, path, **params)
    except _core.LlamaError as e:
        reasons = projector_reasons(str(e))
        if not reasons and not any(_core.projector_caps(path)):
            reasons = [_NO_ENCODER]
        raise FlagFileError(head + ("; ".join(reasons) or _GENERIC)) from None
