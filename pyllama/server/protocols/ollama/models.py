"""Ollama's model endpoints: /api/tags, /api/show, /api/ps, /api/version and the root
probe. There is one model, the one the server loaded; nothing is pulled or deleted."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from pyllama import _core, hardware
from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import json_response, parse
from pyllama.server.protocols.ollama.schemas import ShowRequest
from pyllama.server.state import ServerState

__all__ = ["ROUTES", "rfc3339"]

# Ollama clients parse this as semver and gate features on it (the CLI warns when client
# and server differ, some front ends refuse old servers). 0.9.0 is the first release with
# every feature this module implements (tools, structured `format`, `think`, tool_name),
# so version checks enable those and nothing newer.
VERSION = "0.9.0"

# llama_ftype (general.file_type) -> Ollama's quantization_level
_FTYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}  # fmt: skip
# general.* keys that hold numbers; the others under general.* are text
_GENERAL_NUMBERS = {"general.file_type", "general.quantization_version", "general.alignment"}
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?\d+\.\d*(?:[eE][-+]?\d+)?")


def _state(request: Request) -> ServerState:
    return request.app.state.pyllama


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _human_count(n: int) -> str:
    """Ollama's parameter_size: 135M -> "134.52M", 8B -> "8.0B"."""
    for scale, unit, digits in ((1e9, "B", 1), (1e6, "M", 2)):
        if n >= scale:
            x = n / scale
            return f"{x:.0f}{unit}" if x == int(x) else f"{x:.{digits}f}{unit}"
    return f"{n / 1e3:.0f}K" if n >= 1000 else str(n)


def _details(model: _core.Model) -> dict[str, Any]:
    meta = model.metadata
    arch = meta.get("general.architecture", "")
    ftype = meta.get("general.file_type", "")
    return {
        "parent_model": "",
        "format": "gguf",
        "family": arch,
        "families": [arch] if arch else None,
        "parameter_size": _human_count(model.n_params),
        "quantization_level": _FTYPES.get(int(ftype), "") if ftype.isdigit() else "",
    }


_HASHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyllama-digest")
_DIGESTS: dict[tuple[str, int, int], Future[str]] = {}


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)  # releases the GIL for each chunk
    return h.hexdigest()


async def _digest(path: str, size: int, mtime_ns: int) -> str:
    """The model file's sha256, as Ollama's digest is its blob's: hashed once per file
    version on a worker thread (the event loop keeps serving), then cached."""
    key = (path, size, mtime_ns)
    fut = _DIGESTS.get(key)
    if fut is None:
        fut = _DIGESTS[key] = _HASHER.submit(_sha256, path)
    try:
        return await asyncio.wrap_future(fut)
    except OSError as e:
        _DIGESTS.pop(key, None)  # the file moved or went away: try again next time
        raise APIError(500, f"cannot read the model file to hash it: {e}") from e


def _stat(state: ServerState) -> os.stat_result:
    state.require()
    try:
        return os.stat(state.model_path)
    except OSError as e:
        raise APIError(500, f"cannot read the model file: {e}") from e


async def _file(state: ServerState) -> tuple[int, float, str]:
    """(size on disk, modification time, sha256) of the model file."""
    st = _stat(state)
    path = os.path.abspath(state.model_path)
    return st.st_size, st.st_mtime, await _digest(path, st.st_size, st.st_mtime_ns)


async def _entry(state: ServerState) -> dict[str, Any]:
    model, _ = state.require()
    size, mtime, digest = await _file(state)
    return {
        "name": state.model_name,
        "model": state.model_name,
        "modified_at": rfc3339(mtime),
        "size": size,
        "digest": digest,
        "details": _details(model),
    }


def _typed(key: str, value: str) -> Any:
    if key.startswith("general.") and key not in _GENERAL_NUMBERS:
        return value
    if value in ("true", "false"):
        return value == "true"
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    return value


def _model_info(model: _core.Model) -> dict[str, Any]:
    """GGUF metadata as the bindings expose it (scalars; arrays such as the vocabulary are
    not), numbers typed as Ollama reports them."""
    info = {
        k: _typed(k, v) for k, v in sorted(model.metadata.items()) if k != "tokenizer.chat_template"
    }
    info["general.parameter_count"] = model.n_params
    return info


def _capabilities(state: ServerState, model: _core.Model) -> list[str]:
    s = state.settings
    if (s.embeddings or s.reranking) and not state.serves_completions:
        return ["embedding"]
    caps = ["completion", "tools"]
    assert state.chat is not None
    if state.chat.supports_thinking:
        caps.append("thinking")
    if s.embeddings:  # a generative model started with --embedding serves both
        caps.append("embedding")
    if min(model.token_fim_pre, model.token_fim_suf, model.token_fim_mid) >= 0:
        caps.append("insert")  # /api/generate's suffix
    if state.modalities["vision"]:
        caps.append("vision")  # Ollama's name for image input
    if state.modalities["audio"]:
        caps.append("audio")
    return caps


def _parameters(state: ServerState) -> str:
    """The server's defaults, in Modelfile PARAMETER form."""
    s = state.settings
    rows: list[tuple[str, Any]] = [("num_ctx", state.n_ctx_slot), ("temperature", s.temperature)]
    if s.seed >= 0:
        rows.append(("seed", s.seed))
    if s.n_predict >= 0:
        rows.append(("num_predict", s.n_predict))
    return "\n".join(f"{k:<30} {v}" for k, v in rows)


async def tags(request: Request) -> Response:
    return json_response({"models": [await _entry(_state(request))]})


async def show(request: Request) -> Response:
    """Any name answers with the one model, as /api/chat and every other route do in
    single-model mode (llama-server's rule); in router mode the router picks the model by
    name and answers 404 for one it does not know."""
    state = _state(request)
    await parse(request, ShowRequest)
    model, _ = state.require()
    assert state.chat is not None
    mtime = _stat(state).st_mtime
    params = _parameters(state)
    # no TEMPLATE line: the template is Jinja, which an Ollama Modelfile cannot hold
    modelfile = f"# Modelfile generated by pyllama-server\nFROM {state.model_path}\n" + "".join(
        f"PARAMETER {line}\n" for line in params.splitlines()
    )
    return json_response(
        {
            "modelfile": modelfile,
            "parameters": params,
            "template": state.chat.source,
            "license": model.metadata.get("general.license", ""),
            "details": _details(model),
            "model_info": _model_info(model),
            "capabilities": _capabilities(state, model),
            "modified_at": rfc3339(mtime),
        }
    )


def _size_vram(state: ServerState) -> int | None:
    """Bytes on GPU devices: 0 when the model can use none (a CPU build, ``-dev none``,
    ``-dev CPU``); otherwise not known: the engine does not report its per-device
    buffer sizes yet (llama.cpp's memory breakdown), and a share computed from layer
    counts would be a guess."""
    named = state.settings.devices  # -dev: [] means every device
    usable = [
        d
        for d in hardware.devices()
        if d.type in ("gpu", "igpu") and (not named or d.name in named)
    ]
    return 0 if not usable else None


async def ps(request: Request) -> Response:
    state = _state(request)
    model, _ = state.require()
    # the model stays loaded for the server's lifetime (keep_alive is not honoured); Ollama
    # shows an expiry more than 20 years ahead as "Forever"
    expires = datetime.fromtimestamp(state.started, timezone.utc) + timedelta(days=36525)
    entry = {
        **await _entry(state),
        "size": model.size,
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "context_length": state.n_ctx_slot,
    }
    vram = _size_vram(state)
    if vram is not None:
        entry["size_vram"] = vram
    return json_response({"models": [entry]})


async def version(request: Request) -> Response:
    return json_response({"version": VERSION})


async def root(request: Request) -> Response:
    return PlainTextResponse("Ollama is running")


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/", root, ["GET", "HEAD"]),
    ("/api/tags", tags, ["GET"]),
    ("/api/show", show, ["POST"]),
    ("/api/ps", ps, ["GET"]),
    ("/api/version", version, ["GET"]),
]
