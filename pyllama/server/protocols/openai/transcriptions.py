"""Speech to text: ``POST /v1/audio/transcriptions`` (and ``/audio/transcriptions``),
OpenAI's multipart upload answered by an audio-capable model, as llama-server does it
(``convert_transcriptions_to_chatcmpl``): one user turn "Transcribe audio to text" (or the
request's ``prompt``), the language appended, the audio after it, then a chat turn."""

from __future__ import annotations

import base64
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError
from pyllama.server.http.multipart import Form, read_form
from pyllama.server.http.wire import json_response
from pyllama.server.pipeline.turn import ChatCall, sampling_from, start_chat
from pyllama.server.state import ServerState

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


def _call(state: ServerState, form: Form) -> tuple[ChatCall, str, str]:
    """The chat call, the response format and the language."""
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
    if (form.get("stream") or "false").lower() == "true":
        raise APIError(400, "streamed transcriptions are not supported")
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
    return call, fmt, language


async def transcriptions(request: Request) -> Response:
    state: ServerState = request.app.state.pyllama
    state.require()
    if not state.modalities["audio"]:
        raise APIError(400, "The current model does not support audio input.")
    call, fmt, language = _call(state, await read_form(request))
    turn = await start_chat(state, call)
    reply = (await turn.replies(request.receive))[0]
    final = reply.final
    text = reply.content
    if fmt == "text":
        return Response(text, media_type="text/plain; charset=utf-8")
    usage = {
        "type": "tokens",
        "input_tokens": final.n_prompt,
        "output_tokens": final.n_predicted,
        "total_tokens": final.n_prompt + final.n_predicted,
        "input_tokens_details": {"cached_tokens": final.n_cached},
    }
    if fmt == "verbose_json":  # no segments or words: the model gives no timestamps
        assert turn.plan.media is not None
        seconds = turn.plan.media.seconds[0]
        body = {"task": "transcribe", "language": language, "duration": seconds, "text": text}
        return json_response({**body, "usage": usage})
    return json_response({"type": "transcript.text.done", "text": text, "usage": usage})


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/v1/audio/transcriptions", transcriptions, ["POST"]),
    ("/audio/transcriptions", transcriptions, ["POST"]),
]
