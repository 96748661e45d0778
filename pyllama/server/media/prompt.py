"""Text with media markers plus the media bytes to a ``MediaPrompt``: the projector
decodes and preprocesses the files and tokenizes, on a worker thread (it releases the
GIL), so the event loop goes on serving. A file it cannot take is a 400."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.media import sources

__all__ = ["resolve_prompts", "tokenize"]


async def tokenize(
    projector: _core.Projector | None, text: str, files: Sequence[bytes]
) -> _core.MediaPrompt:
    if projector is None:
        raise APIError(400, "multimodal data is not supported by this model (no --mmproj)")
    try:
        return await asyncio.to_thread(projector.tokenize, text, list(files), True, True)
    except _core.MediaError as e:
        raise APIError(400, str(e)) from e


async def _one(projector: _core.Projector | None, item: Mapping[str, Any]) -> Any:
    data = item.get("multimodal_data")
    if not data:
        return item
    if projector is None:
        raise APIError(400, "multimodal data is not supported by this model (no --mmproj)")
    text = item.get("prompt_string")
    if not isinstance(text, str):
        raise APIError(400, "a prompt with 'multimodal_data' needs a string 'prompt_string'")
    if not isinstance(data, list) or not all(isinstance(d, str) for d in data):
        raise APIError(400, "'multimodal_data' must be an array of base64 strings")
    return await tokenize(projector, text, [sources.decode_base64(d) for d in data])


async def resolve_prompts(projector: _core.Projector | None, prompt: Any) -> Any:
    """/completion's prompt with each ``{"prompt_string", "multimodal_data"}`` object
    replaced by its MediaPrompt (llama-server's JSON prompt with base64 media)."""
    if isinstance(prompt, Mapping):
        return await _one(projector, prompt)
    if isinstance(prompt, list) and any(isinstance(p, Mapping) for p in prompt):
        return [await _one(projector, p) if isinstance(p, Mapping) else p for p in prompt]
    return prompt
