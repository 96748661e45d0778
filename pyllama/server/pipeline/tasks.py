"""From a validated request to engine tasks: prompts tokenized as llama-server does, the
sampling options every endpoint shares, and submission (a multi-prompt request's tasks go
in together, so they share their first batch). Refusals (context size, overload, bad
fields) are raised here, before any response byte.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from pyllama import _core
from pyllama.engine import TaskStream
from pyllama.sampling import make_sampling_params
from pyllama.server.http.errors import APIError
from pyllama.server.pipeline import ledger
from pyllama.server.pipeline.budget import reasoning_budget
from pyllama.server.pipeline.schemas import Sampling
from pyllama.server.state import ServerState

__all__ = [
    "SAMPLING_FIELDS",
    "Options",
    "backend_sampling",
    "make_tasks",
    "sampling_defaults",
    "stops",
    "submit",
    "tokenize_prompts",
]

SAMPLING_FIELDS = [
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "xtc_probability",
    "xtc_threshold",
    "dynatemp_range",
    "dynatemp_exponent",
    "repeat_last_n",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "dry_sequence_breakers",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "top_n_sigma",
    "adaptive_target",
    "adaptive_decay",
    "min_keep",
    "ignore_eos",
    "samplers",
]


# llama-server's defaults where SamplingParams' own differ: its DRY window is 64 tokens
# (common_params_sampling), where SamplingParams' -1 means the whole context
SERVER_DEFAULTS: dict[str, Any] = {"dry_penalty_last_n": 64}


def sampling_defaults(state: ServerState) -> dict[str, Any]:
    """The sampling fields a request that gives none runs with: llama-server's defaults,
    then the command line's (--top-k ...)."""
    return {**SERVER_DEFAULTS, **state.settings.sampling}


Prompt = Union[list[int], _core.MediaPrompt]  # a runtime alias: no "X | Y" on 3.9


def _tokenize_one(model: _core.Model, prompt: Any) -> Prompt:
    if isinstance(prompt, _core.MediaPrompt):  # media.prompt.resolve_prompts made it
        return prompt
    if isinstance(prompt, dict):  # llama-server's JSON prompt object
        if prompt.get("multimodal_data"):
            raise APIError(400, "multimodal data is not supported by this model")
        parts = prompt.get("content")
        prompt = prompt.get("prompt_string")
        if prompt is None and isinstance(parts, list):  # {"content": [text parts]}
            prompt = parts
        if isinstance(prompt, list):
            if not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in prompt):
                raise APIError(400, "a prompt's content parts must be text parts")
            prompt = "".join(p["text"] for p in prompt)
        if not isinstance(prompt, str):
            raise APIError(400, "a JSON prompt needs a string 'prompt_string' or 'content'")
    if isinstance(prompt, str):
        return model.tokenize_prompt(prompt)
    tokens: list[int] = []
    for i, piece in enumerate(prompt):
        if isinstance(piece, str):  # mixed: only a leading string gets BOS
            tokens += model.tokenize(piece, i == 0, True)
        elif isinstance(piece, int) and not isinstance(piece, bool):
            if not 0 <= piece < model.n_vocab:
                raise APIError(400, f"token id {piece} is out of range [0, {model.n_vocab})")
            tokens.append(piece)
        else:
            raise APIError(400, "a prompt array holds token ids and strings only")
    return tokens


def tokenize_prompts(model: _core.Model, prompt: Any) -> list[Prompt]:
    """llama-server's rules: a string, a token array or a mixed array is one prompt; an
    array of strings or arrays is several. Prompts with media come as MediaPrompts
    (``media.prompt.resolve_prompts``)."""
    if isinstance(prompt, (str, dict, _core.MediaPrompt)):
        prompts = [prompt]
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(p, (str, list, dict, _core.MediaPrompt)) for p in prompt)
    ):
        prompts = prompt
    else:
        prompts = [prompt]
    if not prompts:
        raise APIError(400, "the prompt is empty")
    out = []
    for p in prompts:
        tokens = _tokenize_one(model, p)
        if not tokens:
            raise APIError(400, "the prompt is empty")
        out.append(tokens)
    return out


def _logit_bias(model: _core.Model, bias: Any) -> dict[int, float]:
    """Token ids or token strings (every token of the string) to a bias; false = -inf."""
    out: dict[int, float] = {}
    items = bias.items() if isinstance(bias, dict) else bias
    for item in items:
        if isinstance(bias, dict):
            key, value = item
        else:
            if not isinstance(item, list) or len(item) != 2:
                raise APIError(400, "logit_bias entries must be [token, bias] pairs")
            key, value = item
        value = -float("inf") if value is False else value
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise APIError(400, f"logit_bias value for {key!r} must be a number or false")
        if isinstance(key, int) or (isinstance(key, str) and key.lstrip("-").isdigit()):
            tok = int(key)
            if not 0 <= tok < model.n_vocab:
                raise APIError(400, f"logit_bias token {tok} is out of range")
            out[tok] = float(value)
        elif isinstance(key, str):
            for tok in model.tokenize(key, False, False):
                out[tok] = float(value)
        else:
            raise APIError(400, "logit_bias keys are token ids or strings")
    return out


def stops(stop: Any) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else [s for s in stop if s]


@dataclass
class Options:
    """Generation options common to all endpoints, after translation."""

    n_predict: int = -1
    n_cmpl: int = 1
    n_probs: int = 0
    grammar: str | None = None
    # a lazy grammar (free text until one matches): regex patterns and token ids
    trigger_patterns: list[str] = field(default_factory=list)
    trigger_tokens: list[int] = field(default_factory=list)
    grammar_prefill: list[int] = field(default_factory=list)  # a chat grammar's generation prompt
    preserved: list[int] = field(default_factory=list)  # special tokens written out as text
    stop: list[str] = field(default_factory=list)
    sampling: _core.SamplingParams | None = None  # set by make_tasks: what the tasks sample with
    cmpl_id: str = ""  # the completion id the client sees (control requests name it)
    reasoning: _core.ReasoningBudget | None = None  # None: from the request's own tags


def make_tasks(
    state: ServerState, prompts: Sequence[Prompt], req: Sampling, opts: Options
) -> list[_core.TaskParams]:
    model, _ = state.require()
    s = state.settings
    defaults = sampling_defaults(state)  # a request's own fields win
    kw: dict[str, Any] = {}
    for name in SAMPLING_FIELDS:
        value = getattr(req, name)
        kw[name] = defaults.get(name) if value is None else value
    temp = req.temperature if req.temperature is not None else req.temp
    kw["temperature"] = s.temperature if temp is None else temp
    seed = req.seed if req.seed is not None else s.seed
    kw["seed"] = _core.DEFAULT_SEED if seed is None or seed < 0 else seed
    grammar, schema = req.grammar, req.json_schema
    if opts.grammar is not None:
        grammar, schema = opts.grammar, None
    elif grammar is None and schema is None:
        grammar, schema = defaults.get("grammar"), defaults.get("json_schema")
    bias = req.logit_bias if req.logit_bias is not None else defaults.get("logit_bias")
    try:
        sampling = make_sampling_params(
            grammar=grammar,
            json_schema=schema,
            logit_bias=_logit_bias(model, bias) if bias else None,
            **kw,
        )
    except (ValueError, TypeError) as e:
        raise APIError(400, str(e)) from e
    if opts.trigger_patterns or opts.trigger_tokens:
        sampling.grammar_lazy = True
        sampling.grammar_trigger_patterns = opts.trigger_patterns
        sampling.grammar_trigger_tokens = opts.trigger_tokens
    elif opts.grammar is not None and opts.grammar_prefill:
        sampling.grammar_prefill = opts.grammar_prefill
    opts.sampling = sampling
    n_predict = opts.n_predict
    if n_predict < 0 and s.n_predict >= 0:
        n_predict = s.n_predict
    lora = _lora_scales(state, req.lora, req.model)
    reasoning = opts.reasoning or reasoning_budget(model, s, req)
    sampling.backend_sampling = backend_sampling(req, s.backend_sampling, sampling, reasoning)
    if s.log_prompts_dir:
        log_prompts(s.log_prompts_dir, model, prompts)
    tasks = []
    for tokens in prompts:
        t = _core.TaskParams()
        if isinstance(tokens, _core.MediaPrompt):
            t.set_prompt(tokens)
        else:
            t.prompt = tokens
        t.sampling = sampling
        t.n_predict = n_predict
        t.stop = opts.stop or s.stop_words  # -r: for requests that give no stop
        t.preserved_tokens = opts.preserved
        t.special = s.special
        t.return_progress = req.return_progress and req.stream
        t.cmpl_id = opts.cmpl_id
        t.reasoning = reasoning
        t.n_probs = opts.n_probs
        t.post_sampling_probs = req.post_sampling_probs
        t.cache_prompt = s.cache_prompt if req.cache_prompt is None else req.cache_prompt
        t.n_cmpl = opts.n_cmpl
        t.id_slot = req.id_slot
        t.priority = req.priority
        if req.t_max_predict_ms:
            t.t_max_predict_ms = req.t_max_predict_ms
        t.n_cache_reuse = req.n_cache_reuse if req.n_cache_reuse is not None else s.cache_reuse
        if req.n_keep is not None:  # else --keep (the engine's)
            t.n_keep = req.n_keep
        t.n_discard = req.n_discard or 0
        if req.spec_n_max is not None:
            t.spec_n_max = req.spec_n_max
        if req.spec_n_min is not None:
            t.spec_n_min = req.spec_n_min
        if req.spec_p_min is not None:
            t.spec_p_min = req.spec_p_min
        if lora is not None:
            t.lora_scales = lora
        ledger.note(state, t, ledger.Record(req, sampling, n_predict))
        tasks.append(t)
    return tasks


def backend_sampling(
    req: Sampling, default: bool, sampling: _core.SamplingParams, rb: _core.ReasoningBudget
) -> bool:
    """A request's ``backend_sampling`` (``-bs`` its default), off where llama-server's
    ``common_sampler_init`` turns it off: with a grammar, or with a reasoning budget stage
    (armed as ``build_reasoning_budget`` arms it). The engine also keeps a task on the host
    for ``n_probs`` without ``post_sampling_probs`` and for ``n`` > 1, where llama-server
    still reports true."""
    asked = default if req.backend_sampling is None else req.backend_sampling
    armed = (
        bool(rb.start) and bool(rb.end) and (sampling.grammar_lazy or rb.budget >= 0 or rb.control)
    )
    return bool(asked) and not sampling.grammar and not armed


_prompt_count = itertools.count()


def prompt_text(model: _core.Model, prompt: Prompt) -> str:
    """A prompt's tokens as text, special tokens (BOS...) written out: llama-server's
    ``prompt`` field of a result (``tokens.detokenize(ctx, true)``); media left out."""
    ids = list(prompt.tokens) if isinstance(prompt, _core.MediaPrompt) else list(prompt)
    text = model.detokenize([t for t in ids if t >= 0], False, True)
    return text.decode("utf-8", errors="replace")


def log_prompts(directory: str, model: _core.Model, prompts: Sequence[Prompt]) -> None:
    """--log-prompts-dir: each prompt as text, one file per task (debugging aid)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    for tokens in prompts:
        text = prompt_text(model, tokens).encode()
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(_prompt_count):06d}.txt"
        (folder / name).write_bytes(text)


def adapter_names(state: ServerState) -> list[str]:
    """The loaded LoRA adapters' names, by id: their file stems (as /lora-adapters,
    /v1/models and /metrics name them)."""
    return [Path(path).stem for path, _ in state.settings.lora]


def _lora_scales(
    state: ServerState, lora: list[dict[str, Any]] | None, model: str | None = None
) -> list[float] | None:
    if lora is None:
        # vLLM's way: a request whose model is an adapter's name runs with it at scale 1,
        # the others at 0; the model's own names (and any other) leave the defaults
        names = adapter_names(state)
        if not model or model in state.model_aliases or model not in names:
            return None
        chosen = names.index(model)
        return [1.0 if i == chosen else 0.0 for i in range(len(names))]
    _, engine = state.require()
    n = len(engine.engine.lora_paths)
    scales = [0.0] * n
    for item in lora:
        i, scale = item.get("id"), item.get("scale", 1.0)
        if not isinstance(i, int) or not 0 <= i < n:
            raise APIError(400, f"lora id {i!r} is not a loaded adapter (0..{n - 1})")
        if not isinstance(scale, (int, float)):
            raise APIError(400, "lora scale must be a number")
        scales[i] = float(scale)
    return scales


def submit(state: ServerState, tasks: list[_core.TaskParams]) -> list[TaskStream]:
    """Submit before any response byte: refusals become errors the client can read."""
    _, engine = state.require()
    streams: list[TaskStream] = []
    try:
        streams = engine.submit_many(tasks)
        return streams
    except _core.ContextSizeError as e:
        if tasks and tasks[0].kind != _core.TaskKind.COMPLETION:  # an input too large for a ubatch
            raise APIError(400, str(e), "exceed_context_size_error") from e
        raise APIError(
            400,
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            n_prompt_tokens=int(e.n_prompt_tokens),
            n_ctx=int(e.n_ctx),
        ) from e
    except _core.OverloadedError as e:
        raise APIError(503, str(e)) from e
    except RuntimeError as e:  # completions on a pooled embedding model: llama-server's 500
        raise APIError(500, str(e)) from e
    except ValueError as e:
        raise APIError(400, str(e)) from e
    finally:  # /slots' record of each task (a refused one's note dropped)
        ledger.file(state, tasks, [s.task_id for s in streams])
