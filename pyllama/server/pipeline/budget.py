"""llama-server's reasoning budget for one request (``--reasoning-budget``, the request's
``reasoning_budget_tokens``/``thinking_budget_tokens``, ``reasoning_budget_message``,
``reasoning_control``): tags and message tokenized for the engine's budget stage, which
counts the tokens of a thinking block and, past the budget, forces the message and the end
tag. A chat takes the tags from its template (llama-server's ``thinking_start_tag`` and
``thinking_end_tags``) and its generation prompt; a completion names them itself
(``reasoning_budget_start_tag``, ``reasoning_budget_end_tags``, ``generation_prompt``)."""

from __future__ import annotations

from collections.abc import Callable

from pyllama import _core
from pyllama.chat.prefill import prefill_tokens
from pyllama.server.pipeline.schemas import Sampling
from pyllama.server.settings import Settings

__all__ = ["reasoning_budget"]


def reasoning_budget(
    model: _core.Model,
    settings: Settings,
    req: Sampling,
    tags: tuple[str, list[str]] | None = None,
    generation_prompt: Callable[[], str] | None = None,
    lazy_grammar: bool = False,
) -> _core.ReasoningBudget:
    """What the engine needs; left unarmed (no tags), so that the engine builds no budget
    stage, when there is no block to count or nothing asks for the stage: a budget,
    ``reasoning_control`` or a lazy grammar that must wait for the block's end (llama.cpp's
    condition in ``common_sampler_init``). ``generation_prompt`` is only called when armed."""
    rb = _core.ReasoningBudget()
    if tags is not None:
        start, ends = tags[0], list(tags[1])
    else:
        start = req.reasoning_budget_start_tag or ""
        ends = req.reasoning_budget_end_tags
        if ends is None:
            ends = [req.reasoning_budget_end_tag] if req.reasoning_budget_end_tag else []
    ends = [e for e in ends if e]
    if not start or not ends:
        return rb
    budget = req.reasoning_budget_tokens
    if budget is None:
        budget = req.thinking_budget_tokens
    if budget is None or budget == -1:
        budget = settings.reasoning_budget
    if budget < 0 and not req.reasoning_control and not lazy_grammar:
        return rb
    message = req.reasoning_budget_message
    if message is None:
        message = settings.reasoning_budget_message
    rb.start = model.tokenize(start.strip(), False, True)
    rb.end = [model.tokenize(e.strip(), False, True) for e in ends]
    rb.forced = (model.tokenize(message, False, True) if message else []) + rb.end[0]
    prompt = req.generation_prompt if generation_prompt is None else generation_prompt()
    rb.prefill = prefill_tokens(model, prompt or "")
    rb.budget = budget
    rb.control = req.reasoning_control
    return rb
