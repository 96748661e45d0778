"""Slot persistence (/slots/{id}?action=save|restore|erase) and /lora-adapters."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import AnyObject, json_response, parse
from pyllama.server.state import ServerState

__all__ = ["ROUTES"]

# a bare file name: no separators, no leading dot, bounded length
_FILENAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,254}$")


def _state(request: Request) -> ServerState:
    return request.app.state.pyllama


def _slot_file(state: ServerState, body: dict[str, Any]) -> tuple[str, Path]:
    if not state.settings.slot_save_path:
        raise APIError(
            501, "This server does not support slot save/restore. Start it with `--slot-save-path`"
        )
    name = body.get("filename")
    if not isinstance(name, str) or not _FILENAME.match(name) or ".." in name:
        raise APIError(400, "Invalid filename")
    return name, Path(state.settings.slot_save_path) / name


async def _save(core: Any, slot: int, name: str, path: Path) -> tuple[int, int]:
    """Save ``slot`` to ``path``: (tokens, bytes written). A write that fails (a full disk)
    is the server's fault, a 500 with the system's reason, and leaves no partial file."""
    try:
        n = await asyncio.to_thread(core.save_slot, slot, str(path))
    except RuntimeError as e:
        if "is busy" in str(e):
            raise
        path.unlink(missing_ok=True)
        raise APIError(500, f"Unable to save slot to '{name}': {_reason(e, path)}") from e
    return n, path.stat().st_size


def _reason(e: RuntimeError, path: Path) -> str:
    """llama.cpp's words for the failure, without the server's directory."""
    return str(e).replace(str(path), path.name)


async def slot_action(request: Request) -> Response:
    state = _state(request)
    _, engine = state.require()
    try:
        slot = int(request.path_params["id_slot"])
    except ValueError as e:
        raise APIError(400, "the slot id must be an integer") from e
    if not 0 <= slot < state.n_parallel:
        raise APIError(400, f"slot id {slot} is out of range [0, {state.n_parallel})")
    action = request.query_params.get("action", "")
    body = (await parse(request, AnyObject)).model_dump()
    core = engine.engine
    t0 = time.perf_counter()
    try:
        if action == "save":
            name, path = _slot_file(state, body)
            n, written = await _save(core, slot, name, path)
            ms = (time.perf_counter() - t0) * 1e3
            return json_response(
                {
                    "id_slot": slot,
                    "filename": name,
                    "n_saved": n,
                    "n_written": written,
                    "timings": {"save_ms": ms},
                }
            )
        if action == "restore":
            name, path = _slot_file(state, body)
            if not path.is_file():
                raise APIError(400, f"no saved slot named '{name}'")
            try:
                n = await asyncio.to_thread(core.restore_slot, slot, str(path))
            except RuntimeError as e:  # the file: cut short, another model's, not a slot file
                if "is busy" in str(e):
                    raise
                raise APIError(400, f"Unable to restore slot from '{name}': {e}") from e
            ms = (time.perf_counter() - t0) * 1e3
            return json_response(
                {
                    "id_slot": slot,
                    "filename": name,
                    "n_restored": n,
                    "n_read": path.stat().st_size,
                    "timings": {"restore_ms": ms},
                }
            )
        if action == "erase":
            n_before = next(s["n_cache"] for s in core.slots() if s["id"] == slot)
            await asyncio.to_thread(core.erase_slot, slot)
            return json_response({"id_slot": slot, "n_erased": n_before})
    except RuntimeError as e:  # the slot is busy, or the file is not a slot state
        raise APIError(400, str(e)) from e
    raise APIError(400, "Invalid action: use save, restore or erase")


async def lora_list(request: Request) -> Response:
    state = _state(request)
    _, engine = state.require()
    core = engine.engine
    return json_response(
        [
            {"id": i, "path": p, "scale": s}
            for i, (p, s) in enumerate(zip(core.lora_paths, core.lora_scales()))
        ]
    )


async def lora_set(request: Request) -> Response:
    state = _state(request)
    _, engine = state.require()
    core = engine.engine
    import orjson

    try:
        items = orjson.loads(await request.body())
    except orjson.JSONDecodeError as e:
        raise APIError(400, f"the body is not valid JSON: {e}") from e
    if not isinstance(items, list):
        raise APIError(400, "expected an array of {id, scale}")
    scales = list(core.lora_scales())
    for item in items:
        if not isinstance(item, dict):
            raise APIError(400, "expected an array of {id, scale}")
        i, scale = item.get("id"), item.get("scale")
        if not isinstance(i, int) or not 0 <= i < len(scales):
            raise APIError(400, f"lora id {i!r} is not a loaded adapter")
        if not isinstance(scale, (int, float)) or isinstance(scale, bool):
            raise APIError(400, "lora scale must be a number")
        scales[i] = float(scale)
    core.set_lora_scales(scales)  # new defaults: running requests keep theirs
    return json_response({"success": True})


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/slots/{id_slot}", slot_action, ["POST"]),
    ("/lora-adapters", lora_list, ["GET"]),
    ("/lora-adapters", lora_set, ["POST"]),
]
