"""Speech to text: ``POST /v1/audio/transcriptions`` (and ``/audio/transcriptions``),
OpenAI's multipart upload answered by an audio-capable model, as llama-server does it
(``convert_transcriptions_to_chatcmpl``): one user turn "Transcribe audio to text" (or the
request's ``prompt``), the language appended, the audio after it, then a chat turn.

``stream=true`` answers as llama-server's ``TASK_RESPONSE_TYPE_OAI_ASR`` stream does: one
``data: {"type": "transcript.text.delta", "delta": ...}`` event per generated token (its
raw text, possibly empty), then ``{"type": "transcript.text.done", "text", "usage"}`` with
the whole parsed text, then ``data: [DONE]``."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError
from pyllama.server.http.multipart import Form, read_form
from pyllama.server.http.wire import json_response, sse
from pyllama.server.pipeline import results
from pyllama.server.pipeline.turn import ChatCall, ChatTurn, sampling_from, start_chat
from pyllama.server.state import ServerState
from pyllama.server.streams import sse_reply

__all__ = ["ROUTES"]

ASR_PROMPT = "Transcribe audio to text"  # llama.cpp's common_chat_get_asr_prompt
FORMATS = ("json", "text", "verbose_json")
# llama-server's sampling fields a form may carry beside OpenAI's (values are strings)
_NUMBERS = {"temperature": float, "top_p": float, "top_k": int, "min_p": float, "seed": int}
_KNOWN = {"file", "model", "language", "prompt", "response_format", "max_tokens", "stream"}


def _number(form: Form, name: str, kind: type) -> Any:
    value = form.get(name)
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError as e:
        raise APIError(400, f"'{name}' must be a number, got '{value}'") from e


def _call(state: ServerState, form: Form) -> tuple[ChatCall, str, str, bool]:
    """The chat call, the response format, the language and whether to stream."""
    unknown = sorted((set(form.fields) | set(form.files)) - _KNOWN - set(_NUMBERS))
    if unknown:  # timestamp_granularities[], include[], chunking_strategy ...
        raise APIError(400, f"unsupported transcription field(s): {', '.join(unknown)}")
    upload = form.files.get("file")
    if upload is None or not upload.data:
        raise APIError(400, "No input file found for transcription")
    fmt = form.get("response_format") or "json"
    if fmt not in FORMATS:
        raise APIError(
            400, f"response_format '{fmt}' is not supported: one of {', '.join(FORMATS)}"
        )
    stream = (form.get("stream") or "false").lower()
    if stream not in ("true", "false"):
        raise APIError(400, f"'stream' must be true or false, got '{form.get('stream')}'")
    if stream == "true" and fmt != "json":  # the events have one shape, llama-server's
        raise APIError(400, f"response_format '{fmt}' cannot be streamed: only 'json' can")
    language = form.get("language") or ""
    prompt = form.get("prompt") or ASR_PROMPT
    if language:
        prompt += f" (language: {language})"
    audio = base64.b64encode(upload.data).decode()
    content = [
        {"type": "text", "text": prompt},
        {"type": "input_audio", "input_audio": {"data": audio}},
    ]
    sampling = sampling_from({k: _number(form, k, t) for k, t in _NUMBERS.items()})
    max_tokens = _number(form, "max_tokens", int)
    call = ChatCall(
        messages=[{"role": "user", "content": content}],
        sampling=sampling,
        n_predict=-1 if max_tokens is None else max_tokens,
    )
    return call, fmt, language, stream == "true"


def _usage(final: Any) -> dict[str, Any]:
    return {
        "type": "tokens",
        "input_tokens": final.n_prompt,
        "output_tokens": final.n_predicted,
        "total_tokens": final.n_prompt + final.n_predicted,
        "input_tokens_details": {"cached_tokens": final.n_cached},
    }


def _done(text: str, final: Any) -> dict[str, Any]:
    return {"type": "transcript.text.done", "text": text, "usage": _usage(final)}


async def _stream(turn: ChatTurn) -> AsyncIterator[bytes]:
    pieces: list[bytes] = []
    async for _, ev in results.merged(turn.streams):
        if ev.type == "token":
            pieces.append(ev.text)
            delta = ev.text.decode("utf-8", errors="replace")
            yield sse({"type": "transcript.text.delta", "delta": delta})
        else:
            message, _ = turn.plan.message(b"".join(pieces).decode("utf-8", errors="replace"))
            yield sse(_done(message.get("content") or "", ev))
    yield b"data: [DONE]\n\n"


async def transcriptions(request: Request) -> Response:
    state: ServerState = request.app.state.pyllama
    state.require()
    if not state.modalities["audio"]:
        raise APIError(400, "The current model does not support audio input.")
    call, fmt, language, stream = _call(state, await read_form(request))
    turn = await start_chat(state, call)
    if stream:
        return sse_reply(request, _stream(turn), ping_s=state.settings.sse_ping_interval)
    reply = (await turn.replies(request.receive))[0]
    final = reply.final
    text = reply.content
    if fmt == "text":
        return Response(text, media_type="text/plain; charset=utf-8")
    usage = _usage(final)
    if fmt == "verbose_json":  # no segments or words: the model gives no timestamps
        assert turn.plan.media is not None
        seconds = turn.plan.media.seconds[0]
        body = {"task": "transcribe", "language": language, "duration": seconds, "text": text}
        return json_response({**body, "usage": usage})
    return json_response(_done(text, final))


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/v1/audio/transcriptions", transcriptions, ["POST"]),
    ("/audio/transcriptions", transcriptions, ["POST"]),
]
