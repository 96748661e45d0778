"""/infill: fill-in-the-middle for code models, llama-server's repo-level FIM layout.

    [FIM_REP]myproject\\n [FIM_SEP]file0\\n extra0 ... [FIM_SEP]filename\\n
    [FIM_PRE]prefix [FIM_SUF]suffix [FIM_MID]prompt

Prefix and suffix are cut to fit one batch (3:1); extra chunks fill what is left of the
context, nearest first."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama import _core
from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import parse
from pyllama.server.protocols.native.routes import run_completion
from pyllama.server.protocols.native.schemas import InfillRequest

__all__ = ["ROUTES", "infill_tokens"]

# "\n\n--- snippet ---\n\n": separates extra chunks when the vocabulary has no FIM_SEP
_SNIPPET = "\n\n--- snippet ---\n\n"


def _mixed(model: _core.Model, value: Any) -> list[int]:
    if isinstance(value, str):
        return model.tokenize(value, False, False)
    out: list[int] = []
    for piece in value:
        if isinstance(piece, str):
            out += model.tokenize(piece, False, False)
        elif 0 <= piece < model.n_vocab:
            out.append(piece)
        else:
            raise APIError(400, f"token id {piece} is out of range [0, {model.n_vocab})")
    return out


def infill_tokens(
    model: _core.Model,
    prefix: Any,
    suffix: Any,
    extra: list[dict[str, Any]],
    prompt: list[int],
    *,
    n_batch: int,
    n_predict: int,
    n_ctx: int,
    spm: bool = False,
) -> list[int]:
    """The FIM prompt, as llama-server's format_prompt_infill builds it."""
    rep, sep = model.token_fim_rep, model.token_fim_sep
    extra_tokens: list[int] = []
    if rep >= 0:
        extra_tokens += [rep, *model.tokenize("myproject\n", False, False)]
    for chunk in extra:
        if sep >= 0:
            extra_tokens += [
                sep,
                *model.tokenize(chunk.get("filename", "tmp") + "\n", False, False),
            ]
        else:
            extra_tokens += model.tokenize(_SNIPPET, False, False)
        extra_tokens += model.tokenize(chunk["text"], False, False)
    if sep >= 0:
        extra_tokens += [sep, *model.tokenize("filename\n", False, False)]

    pre, suf = _mixed(model, prefix), _mixed(model, suffix)
    n_pre = min(len(pre), 3 * (n_batch // 4))
    n_suf = min(len(suf), max(0, n_batch // 4 - (2 + len(prompt))))
    n_extra = min(max(0, n_ctx - n_batch - 2 * n_predict), len(extra_tokens))
    pre = [model.token_fim_pre, *pre[len(pre) - n_pre :], *prompt]
    suf = [model.token_fim_suf, *suf[:n_suf]]
    first, second = (suf, pre) if spm else (pre, suf)
    head = [model.token_bos] if model.add_bos else []
    kept = extra_tokens[len(extra_tokens) - n_extra :] if n_extra else []
    return [*kept, *head, *first, *second, model.token_fim_mid]


def _check_extra(extra: list[dict[str, Any]]) -> None:
    for chunk in extra:
        if not isinstance(chunk.get("text"), str):
            raise APIError(
                400, 'extra_context chunk must contain a "text" field with a string value'
            )
        if "filename" in chunk and not isinstance(chunk["filename"], str):
            raise APIError(400, 'extra_context chunk\'s "filename" field must be a string')


async def infill(request: Request) -> Response:
    state = request.app.state.pyllama
    model, engine = state.require()
    missing = [
        f"{what} token is missing. "
        for what, tok in (
            ("prefix", model.token_fim_pre),
            ("suffix", model.token_fim_suf),
            ("middle", model.token_fim_mid),
        )
        if tok < 0
    ]
    if missing:
        raise APIError(
            501, "Infill is not supported by this model: " + "".join(missing), "not_supported_error"
        )
    req = await parse(request, InfillRequest)
    _check_extra(req.input_extra)
    s = state.settings
    n_predict = req.n_predict if req.n_predict is not None else req.max_tokens
    tokens = infill_tokens(
        model,
        req.input_prefix,
        req.input_suffix,
        req.input_extra,
        model.tokenize(req.prompt, False, True) if req.prompt else [],
        n_batch=s.n_batch,
        n_predict=s.n_predict if n_predict is None else n_predict,
        n_ctx=engine.engine.n_ctx_slot,
        spm=s.spm_infill,
    )
    return await run_completion(request, state, req, [tokens])


ROUTES: list[tuple[str, Any, list[str]]] = [("/infill", infill, ["POST"])]
