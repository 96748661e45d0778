"""``GET /slots``: each slot as llama-server's ``server_slot::to_json`` shows it (its
``only_metrics`` form, the default), from the engine's slot snapshot and the ledger of the
tasks submitted (``pipeline.ledger``), plus pyllama's own fields (``state``, ``n_past``,
``n_decoded``, ``n_cache_tokens``).

llama-server shows a slot's task fields once a task has run on it: the running task's, or
the last one's after its end, when it has reset the slot's counters (prompt tokens
processed and taken from the cache, tokens decoded: 0; no limit left: -1). The engine's
slot snapshot says which task ran last, its prompt counts, whether it may still sample and
whether it wrote a newline; the ledger keeps the parameters of the latest tasks."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import json_response
from pyllama.server.pipeline import ledger
from pyllama.server.protocols.native.routes import generation_settings
from pyllama.server.state import ServerState

__all__ = ["ROUTES", "slot_json", "slots"]

# llama-server's task_params::to_json(only_metrics=true) keys, less the chat parser's
# (chat_format, reasoning_format, reasoning_in_content, generation_prompt: a task's
# protocol decides them, and the ledger does not keep them)
PARAMS = (
    "seed", "temperature", "dynatemp_range", "dynatemp_exponent", "top_k", "top_p", "min_p",
    "top_n_sigma", "xtc_probability", "xtc_threshold", "typical_p", "repeat_last_n",
    "repeat_penalty", "presence_penalty", "frequency_penalty", "dry_multiplier", "dry_base",
    "dry_allowed_length", "dry_penalty_last_n", "mirostat", "mirostat_tau", "mirostat_eta",
    "adaptive_target", "adaptive_decay", "max_tokens", "n_predict", "n_keep", "n_discard",
    "ignore_eos", "stream", "n_probs", "min_keep", "samplers", "speculative.types",
    "timings_per_token", "post_sampling_probs", "backend_sampling",
)  # fmt: skip


def _params(state: ServerState, record: ledger.Record) -> dict[str, Any]:
    settings = generation_settings(state, record.req, record.sampling)
    out = {k: settings[k] for k in PARAMS}
    out["max_tokens"] = out["n_predict"] = record.n_predict
    engine = state.engine
    if record.req.lora is None and engine is not None:  # the adapters' default scales
        out["lora"] = [{"id": i, "scale": x} for i, x in enumerate(engine.engine.lora_scales())]
    return out


def slot_json(state: ServerState, s: dict[str, Any]) -> dict[str, Any]:
    busy = s["state"] != "idle"
    out: dict[str, Any] = {
        "id": s["id"],
        "n_ctx": s["n_ctx"],
        "speculative": state.speculative,
        "is_processing": busy,
    }
    last = s["last_task_id"]
    record = ledger.lookup(state, last) if last else None
    if busy:
        out["id_task"] = s["task_id"]
        # the slot's tokens, as llama-server's: the prompt, then each token once sampled
        generating = s["state"] == "generating"
        out["n_prompt_tokens"] = s["n_prompt"] + s["n_decoded"] if generating else s["n_cache"]
        out["n_prompt_tokens_processed"] = s["n_prompt_processed"]
        out["n_prompt_tokens_cache"] = s["n_prompt_cached"]
        token: dict[str, Any] = {
            "has_next_token": s["has_next_token"],
            "has_new_line": s["has_new_line"],
            "n_decoded": s["n_decoded"],
        }
        if record is not None:
            out["params"] = _params(state, record)
            left = record.n_predict - s["n_decoded"]
            token["n_remain"] = -1 if record.n_predict < 0 else left
        out["next_token"] = [token]
    elif last:  # a task ran here and ended: its counters were reset
        out["id_task"] = last
        if record is not None:
            out["params"] = _params(state, record)
        out["n_prompt_tokens"] = s["n_cache"]
        out["n_prompt_tokens_processed"] = 0
        out["n_prompt_tokens_cache"] = 0
        token = {"has_next_token": s["has_next_token"], "has_new_line": s["has_new_line"]}
        out["next_token"] = [{**token, "n_remain": -1, "n_decoded": 0}]
    out.update(  # pyllama's
        {
            "state": s["state"],
            "n_past": s["n_past"],
            "n_decoded": s["n_decoded"],
            "n_cache_tokens": s["n_cache"],
        }
    )
    return out


async def slots(request: Request) -> Response:
    state: ServerState = request.app.state.pyllama
    if not state.settings.slots:
        raise APIError(501, "This server does not support slots endpoint. Start it with `--slots`")
    _, engine = state.require()
    return json_response([slot_json(state, s) for s in engine.engine.slots()])


ROUTES: list[tuple[str, Any, list[str]]] = [("/slots", slots, ["GET"])]
