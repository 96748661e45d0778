"""The generation loop of ``Llama``'s completions and chat: the prompt through
llama-cpp-python's ``generate``, the tokens to text pieces (partial UTF-8 and stop strings
held back by the engine's ``TextStream``), logprobs from ``scores``, the prompt cache
consulted before and filled after. Yields the pieces of ``responses``."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyllama import _core
from pyllama.llama.cache import longest_token_prefix
from pyllama.llama.responses import token_logprobs
from pyllama.llama.sampler_chain import SamplerArgs

if TYPE_CHECKING:
    from pyllama.llama.llama import Llama

__all__ = ["completion_pieces"]


def completion_pieces(
    llm: Llama,
    tokens: list[int],
    *,
    max_tokens: int | None,
    stop: Any,
    n_logprobs: int | None,
    seed: int | None,
    args: SamplerArgs,
    stopping_criteria: Any,
    logits_processor: Any,
    grammar: Any,
    triggers: list[str] | None,
    logit_bias: Mapping[Any, float] | None,
    preserved: Sequence[int] = (),
) -> Iterator[dict[str, Any]]:
    """The generation loop of completions and chat: pieces (see ``responses``)."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if not all(isinstance(s, str) for s in stops):
        raise ValueError("stop must be a string or a list of strings")
    if n_logprobs is not None and not llm._logits_all:
        raise ValueError("logprobs is not supported for models created with logits_all=False")
    limit = llm._n_ctx - len(tokens)
    if max_tokens is not None and 0 < max_tokens < limit:
        limit = max_tokens
    _cache_load(llm, tokens)
    llm.set_seed(seed if seed is not None else random.Random(llm._seed).randint(0, 2**32))
    assembler = _core.TextStream(stops)
    finish, n = "length", 0
    produced: list[int] = []
    with llm._lock:
        gen = llm.generate(
            tokens,
            top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, typical_p=args.typical_p,
            temp=args.temp, repeat_penalty=args.repeat_penalty, frequency_penalty=args.frequency_penalty,
            presence_penalty=args.presence_penalty, tfs_z=args.tfs_z, mirostat_mode=args.mirostat_mode,
            mirostat_tau=args.mirostat_tau, mirostat_eta=args.mirostat_eta, penalize_nl=args.penalize_nl,
            logits_processor=logits_processor, stopping_criteria=stopping_criteria, grammar=grammar,
            logit_bias=logit_bias, grammar_triggers=triggers,
        )  # fmt: skip
        try:
            for token in gen:
                if llm._model.is_eog(token):
                    finish = "stop"
                    break
                n += 1
                produced.append(token)
                lp = None
                if n_logprobs is not None:
                    row = llm.scores[llm._last_row]  # the logits this token was drawn from
                    lp = token_logprobs(row, token, n_logprobs, llm._piece_text)
                text = assembler.push(llm._model.token_to_piece(token, token in preserved))
                yield {
                    "text": text.decode("utf-8", errors="replace"),
                    "token": token,
                    "logprobs": lp,
                }
                if assembler.stopped:
                    finish = "stop"
                    break
                if n >= limit:
                    break
            else:
                finish = "stop"  # a stopping criterion ended it
        finally:
            gen.close()
        tail = assembler.flush()
        if tail:
            yield {
                "text": tail.decode("utf-8", errors="replace"),
                "token": None,
                "logprobs": None,
            }
        if llm.cache is not None:
            llm.cache[tokens + produced] = llm.save_state()
    yield {"finish_reason": finish, "completion_tokens": n}


def _cache_load(llm: Llama, tokens: list[int]) -> None:
    if llm.cache is None:
        return
    try:
        item = llm.cache[tokens]
    except KeyError:
        return
    cached = longest_token_prefix(item.input_ids[: item.n_tokens].tolist(), tokens)
    if cached > longest_token_prefix(llm._input_ids.tolist(), tokens):
        llm.load_state(item)
