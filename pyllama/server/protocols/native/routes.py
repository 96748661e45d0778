"""llama-server's own endpoints: /completion, /tokenize, /detokenize, /apply-template,
/props, /health, /slots, /metrics."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama import _core, hardware
from pyllama.sampling import make_sampling_params
from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import AnyObject, json_response, parse, sse
from pyllama.server.media import prompt as media_prompt
from pyllama.server.media.content import take_media
from pyllama.server.ops.metrics import render as render_metrics
from pyllama.server.pipeline import results, tasks
from pyllama.server.pipeline.plan import plan_chat
from pyllama.server.pipeline.schemas import Sampling
from pyllama.server.protocols.native.schemas import (
    CompletionRequest,
    DetokenizeRequest,
    TemplateRequest,
    TokenizeRequest,
)
from pyllama.server.state import ServerState
from pyllama.server.streams import sse_reply

__all__ = ["ROUTES"]


def _state(request: Request) -> ServerState:
    return request.app.state.pyllama


# the SamplingParams fields generation_settings reports (llama-server's names)
_SAMPLING_SETTINGS = (
    "seed",
    "temperature",
    *tasks.SAMPLING_FIELDS,
    "grammar",
)


def generation_settings(
    state: ServerState, req: Any = None, sampling: _core.SamplingParams | None = None
) -> dict[str, Any]:
    """llama-server's ``generation_settings``: what a request ran with (``sampling``, as
    make_tasks built it) or, without one, the server's defaults (/props)."""
    s = state.settings
    if sampling is None:  # llama-server's and the command line's (--temp, --top-k ...)
        defaults = tasks.sampling_defaults(state)
        fields = {k: v for k, v in defaults.items() if k not in ("grammar", "json_schema")}
        sampling = make_sampling_params(
            grammar=s.sampling.get("grammar"),  # type: ignore[arg-type]
            json_schema=s.sampling.get("json_schema"),
            **fields,
        )
        sampling.temperature = s.temperature
        if s.seed >= 0:
            sampling.seed = s.seed
        sampling.backend_sampling = s.backend_sampling
    out: dict[str, Any] = {name: getattr(sampling, name) for name in _SAMPLING_SETTINGS}
    n_predict = s.n_predict
    if req is not None:
        asked = req.n_predict if req.n_predict is not None else getattr(req, "max_tokens", None)
        n_predict = asked if asked is not None else n_predict
    # -inf (a banned token) goes out as null, as llama-server's JSON writes it; ignore_eos
    # bans the end-of-generation tokens (the sampler chain adds those biases itself)
    bias = list(sampling.logit_bias)
    if sampling.ignore_eos:
        bias += [(t, -math.inf) for t in state.eog_tokens]
    out["logit_bias"] = [{"bias": b, "token": t} for t, b in bias]
    out.update(
        {
            "n_predict": n_predict,
            "max_tokens": n_predict,
            "n_keep": s.n_keep if req is None or req.n_keep is None else req.n_keep,
            "n_discard": 0 if req is None or req.n_discard is None else req.n_discard,
            "stop": tasks.stops(req.stop) if req is not None else [],
            "stream": bool(req is not None and req.stream),
            "n_probs": (req.n_probs or 0) if req is not None else 0,
            "post_sampling_probs": bool(req is not None and req.post_sampling_probs),
            "backend_sampling": sampling.backend_sampling,
            "timings_per_token": bool(req is not None and req.timings_per_token),
            "grammar_lazy": sampling.grammar_lazy,
            "n_ctx": state.n_ctx_slot,
            "speculative.n_max": _pick_spec(req, "spec_n_max", s.spec_draft_n_max),
            "speculative.n_min": _pick_spec(req, "spec_n_min", s.spec_draft_n_min),
            "speculative.p_min": _pick_spec(req, "spec_p_min", s.spec_draft_p_min),
            # llama.cpp's list starts with "none"; --spec-type adds to it
            "speculative.types": ",".join(["none", *s.spec_types]),
        }
    )
    return out


def _pick_spec(req: Any, name: str, default: Any) -> Any:
    value = getattr(req, name, None) if req is not None else None
    return default if value is None else value


def ran_on(r: results.Result) -> dict[str, int]:
    """``id_slot``: the slot that ran this completion, as llama-server reports it (the
    engine's final event says which)."""
    slot = r.final.id_slot if r.final is not None else -1
    return {"id_slot": slot} if slot >= 0 else {}


def native_final(
    state: ServerState,
    r: results.Result,
    n_prompt: int,
    req: Sampling,
    streamed: bool,
    prompt: str = "",
    sampling: _core.SamplingParams | None = None,
) -> dict[str, Any]:
    """/completion's result object (also the ``__verbose`` of the OpenAI routes)."""
    f = r.final
    assert f is not None
    out: dict[str, Any] = {
        "index": r.index,
        "content": "" if streamed else r.content,
        "tokens": [] if streamed else (r.tokens if req.return_tokens else []),
        **ran_on(r),
        "stop": True,
        "model": state.model_name,
        "tokens_predicted": f.n_predicted,
        "tokens_evaluated": n_prompt,
        "generation_settings": generation_settings(state, req, sampling),
        "prompt": prompt,
        "has_new_line": "\n" in r.content,
        "truncated": f.truncated,
        "stop_type": results.stop_type(f),
        "stopping_word": f.stopping_word,
        "tokens_cached": n_prompt + f.n_predicted,
        "timings": results.timings(f),
    }
    if not streamed and req.n_probs:
        out["completion_probabilities"] = [
            results.token_probs(state, ev, req.post_sampling_probs) for ev in r.probs
        ]
    fields = getattr(req, "response_fields", None)
    if fields:
        out = _pick(out, fields)
    return out


def _pick(obj: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """response_fields: keep the named (possibly nested, a/b) fields, flattened by name."""
    out: dict[str, Any] = {}
    for name in fields:
        cur: Any = obj
        for part in name.split("/"):
            if not isinstance(cur, dict) or part not in cur:
                cur = None
                break
            cur = cur[part]
        if cur is not None:
            out[name] = cur
    return out


async def completion(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, CompletionRequest)
    model, _ = state.require()
    prompt = await media_prompt.resolve_prompts(state.projector, req.prompt)
    return await run_completion(request, state, req, tasks.tokenize_prompts(model, prompt))


async def run_completion(
    request: Request, state: ServerState, req: Any, prompts: list[list[int]]
) -> Response:
    """/completion's generation and answer for tokenized prompts (also /infill's)."""
    n_predict = req.n_predict if req.n_predict is not None else req.max_tokens
    opts = tasks.Options(
        n_predict=-1 if n_predict is None else n_predict,
        n_cmpl=req.n_cmpl,
        n_probs=req.n_probs or 0,
        stop=tasks.stops(req.stop),
    )
    streams = tasks.submit(state, tasks.make_tasks(state, prompts, req, opts))
    if req.stream:
        return sse_reply(
            request,
            _stream(state, streams, prompts, req, opts.sampling),
            ping_s=req.ping_s(state.settings.sse_ping_interval),
        )
    done = await results.collect(streams, req.n_cmpl, request.receive)
    out = [
        native_final(
            state,
            r,
            len(prompts[i // req.n_cmpl]),
            req,
            False,
            tasks.prompt_text(state.require()[0], prompts[i // req.n_cmpl]),
            opts.sampling,
        )
        for i, r in enumerate(done)
    ]
    for i, o in enumerate(out):
        if "index" in o:
            o["index"] = i
    return json_response(out[0] if len(out) == 1 else out)


async def _stream(
    state: ServerState,
    streams: list[Any],
    prompts: list[list[int]],
    req: CompletionRequest,
    sampling: _core.SamplingParams | None,
) -> AsyncIterator[bytes]:
    n_pred: dict[tuple[int, int], int] = {}
    async for i, ev in results.merged(streams, progress=req.return_progress):
        index = i * req.n_cmpl + ev.index
        if ev.type == "progress":
            # llama-server's progress chunk is a token chunk of an empty token: token 0
            progress: dict[str, Any] = {
                "index": index,
                "content": "",
                "tokens": [0],
                "stop": False,
                "id_slot": -1,  # llama-server sets it in the final result only
                "tokens_predicted": 0,
                "tokens_evaluated": len(prompts[i]),
            }
            if req.timings_per_token:
                progress["timings"] = results.timings(ev)
            progress["prompt_progress"] = results.prompt_progress(ev)
            yield sse(progress)
        elif ev.type == "token":
            key = (i, ev.index)
            n_pred[key] = n_pred.get(key, 0) + (1 if ev.token >= 0 else 0)
            chunk: dict[str, Any] = {
                "index": index,
                "content": ev.text.decode("utf-8", errors="replace"),
                # every streamed token, as llama-server (return_tokens is the final's)
                "tokens": [ev.token] if ev.token >= 0 else [],
                "stop": False,
                "id_slot": -1,  # llama-server sets it in the final result only
                "tokens_predicted": n_pred[key],
                "tokens_evaluated": len(prompts[i]),
            }
            if req.n_probs and ev.token >= 0:
                chunk["completion_probabilities"] = [
                    results.token_probs(state, ev, req.post_sampling_probs)
                ]
            if req.timings_per_token:
                chunk["timings"] = results.timings(ev)
            yield sse(chunk)
        else:
            r = results.Result(index, final=ev)
            text = tasks.prompt_text(state.require()[0], prompts[i])
            yield sse(native_final(state, r, len(prompts[i]), req, True, text, sampling))


async def tokenize(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, TokenizeRequest)
    model, _ = state.require()
    tokens = model.tokenize(req.content, req.add_special, req.parse_special)
    if not req.with_pieces:
        return json_response({"tokens": tokens})
    out = []
    for t in tokens:
        piece = model.token_to_piece(t, special=True)
        try:
            out.append({"id": t, "piece": piece.decode("utf-8")})
        except UnicodeDecodeError:  # a partial character: its bytes, as llama-server
            out.append({"id": t, "piece": list(piece)})
    return json_response({"tokens": out})


async def detokenize(request: Request) -> Response:
    state = _state(request)
    req = await parse(request, DetokenizeRequest)
    model, _ = state.require()
    for t in req.tokens:
        if not 0 <= t < model.n_vocab:
            raise APIError(400, f"token id {t} is out of range [0, {model.n_vocab})")
    text = model.detokenize(req.tokens, False, True).decode("utf-8", errors="replace")
    return json_response({"content": text})


async def apply_template(request: Request) -> Response:
    """llama-server's: the chat body through its request parse, the prompt alone back."""
    state = _state(request)
    req = await parse(request, TemplateRequest)
    state.require()
    # media loaded as a chat's are (llama-server loads them for /apply-template too)
    messages, _ = await take_media(req.messages, state.media_rules())
    plan = await asyncio.to_thread(  # off the event loop, as every chat's plan
        plan_chat,
        state,
        messages,
        tools=req.tools,
        tool_choice=req.tool_choice,
        add_generation_prompt=req.add_generation_prompt,
        template_kwargs=req.chat_template_kwargs,
        continue_final=req.continue_final_message,
        reasoning_format=req.reasoning_format,
        media=True,  # only the text is wanted
    )
    return json_response({"prompt": plan.prompt})


async def health(request: Request) -> Response:
    state = _state(request)
    state.check()
    return json_response({"status": "ok"})


def _default_params(state: ServerState) -> dict[str, Any]:
    """/props ``default_generation_settings.params``: the defaults a /completion request
    runs with. A raw completion parses no chat (llama-server's "Content-only" format, no
    reasoning split, no generation prompt), -bs as backend_sampling."""
    params = generation_settings(state)
    params.update(
        {
            "chat_format": "Content-only",
            "reasoning_format": "none",
            "reasoning_in_content": False,
            "generation_prompt": "",
        }
    )
    if state.engine is not None:  # the adapters' default scales (asleep: not known)
        scales = state.engine.engine.lora_scales()
        params["lora"] = [{"id": i, "scale": x} for i, x in enumerate(scales)]
    return params


async def props(request: Request) -> Response:
    state = _state(request)
    state.check()  # answered while asleep, from what the state keeps
    chat = state.chat
    assert chat is not None
    s = state.settings
    out: dict[str, Any] = {
        "default_generation_settings": {
            "id": 0,
            "id_task": -1,
            "n_ctx": state.n_ctx_slot,
            "speculative": state.speculative,
            "is_processing": False,
            "params": _default_params(state),
        },
        "total_slots": state.n_parallel,
        "model_alias": state.model_name,
        "model_path": state.model_path,
        "modalities": state.modalities,
        "media_marker": state.media_marker,
        "endpoint_slots": s.slots,
        "endpoint_props": s.props,
        "endpoint_metrics": s.metrics,
        "ui": s.webui,
        "ui_settings": s.ui_config or {},
        "chat_template": chat.source,
        "chat_template_caps": chat.caps,
        "bos_token": state.bos_text,
        "eos_token": state.eos_text,
        "build_info": _core.build_info(),
        "is_sleeping": state.sleeping,
        "cors_proxy_enabled": s.ui_mcp_proxy,
    }
    ftype = state.info.get("ftype")
    if ftype is not None:
        out["model_ftype"] = ftype
    if chat.tool_use_source:
        out["chat_template_tool_use"] = chat.tool_use_source
    out.update(
        {
            # pyllama's: where the model runs (ggml devices, the CPU variant picked at import)
            "devices": [
                {"name": d.name, "description": d.description, "type": d.type}
                for d in hardware.devices()
            ],
            "cpu_variant": hardware.cpu_variant(),
            "offloaded_layers": state.offload[0],
            "offloadable_layers": state.offload[1],
        }
    )
    return json_response(out)


async def set_props(request: Request) -> Response:
    state = _state(request)
    if not state.settings.props:
        raise APIError(
            501, "This server does not support changing global properties. Start it with `--props`"
        )
    state.require()
    await parse(request, AnyObject)
    return json_response({"success": True})


async def metrics(request: Request) -> Response:
    state = _state(request)
    if not state.settings.metrics:
        raise APIError(
            501, "This server does not support metrics endpoint. Start it with `--metrics`"
        )
    return Response(
        render_metrics(state),
        media_type="text/plain; version=0.0.4",
        headers={"Process-Start-Time-Unix": str(state.started)},
    )


ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/health", health, ["GET"]),
    ("/v1/health", health, ["GET"]),
    ("/props", props, ["GET"]),
    ("/props", set_props, ["POST"]),
    ("/completion", completion, ["POST"]),
    ("/completions", completion, ["POST"]),
    ("/tokenize", tokenize, ["POST"]),
    ("/detokenize", detokenize, ["POST"]),
    ("/apply-template", apply_template, ["POST"]),
    ("/metrics", metrics, ["GET"]),
]
