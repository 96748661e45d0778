"""One chat turn on the engine, for any protocol.

Every chat-speaking route (OpenAI chat, Anthropic Messages, OpenAI Responses, Ollama)
translates its request into a ``ChatCall`` (OpenAI-shaped messages and tools, llama-server
sampling fields), starts it with ``start_chat`` and translates the reply back: whole
(``ChatTurn.replies``) or streamed as OpenAI-style deltas (``ChatTurn.stream``). The
engine sees one request type whatever the protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from pyllama import _core
from pyllama.chat.prefill import prefill_tokens
from pyllama.engine import TaskStream
from pyllama.sampling import grammar_for_response_format
from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import describe_validation
from pyllama.server.media import content
from pyllama.server.media import prompt as media_prompt
from pyllama.server.pipeline import results, tasks
from pyllama.server.pipeline.budget import reasoning_budget
from pyllama.server.pipeline.plan import ChatPlan, ToolCall, plan_chat
from pyllama.server.pipeline.schemas import Sampling
from pyllama.server.state import ServerState

__all__ = [
    "EXTENSIONS",
    "ChatCall",
    "ChatTurn",
    "Reply",
    "extensions",
    "sampling_from",
    "start_chat",
]

# llama-server's sampling fields that the other protocols' routes accept beside their own
# (seed, grammar, min_p ...), as extra body fields
EXTENSIONS = frozenset(
    [
        *tasks.SAMPLING_FIELDS,
        "grammar",
        "json_schema",
        "seed",
        "logit_bias",
        "cache_prompt",
        "id_slot",
        "priority",
    ]
)


def extensions(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The llama-server sampling extensions among a request's unknown fields."""
    return {k: v for k, v in (extra or {}).items() if k in EXTENSIONS}


def sampling_from(fields: Mapping[str, Any]) -> Sampling:
    """llama-server sampling fields (None values dropped) validated as a request would be;
    400 naming the field otherwise."""
    try:
        return Sampling.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as e:
        raise APIError(400, describe_validation(e)) from e


@dataclass
class ChatCall:
    """A chat request after a protocol's translation."""

    messages: Any  # OpenAI-shaped messages
    sampling: Sampling
    n_predict: int = -1
    stop: list[str] = field(default_factory=list)
    tools: Any = None  # OpenAI-shaped: [{"type": "function", "function": {...}}]
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    response_format: Mapping[str, Any] | None = None
    reasoning_format: str | None = None
    template_kwargs: Mapping[str, Any] | None = None
    add_generation_prompt: bool = True
    continue_final: bool | None = None  # None: continue a final assistant message (prefill)
    n: int = 1
    n_probs: int = 0
    cmpl_id: str = ""  # the id the client sees: POST /v1/chat/completions/control names it


@dataclass
class Reply:
    """One whole assistant reply."""

    index: int
    message: dict[str, Any]  # OpenAI assistant message: content, reasoning_content, tool_calls
    calls: list[ToolCall]
    final: _core.Event

    @property
    def content(self) -> str:
        return self.message.get("content") or ""

    @property
    def reasoning(self) -> str:
        return self.message.get("reasoning_content") or ""

    @property
    def finish(self) -> str:
        """'stop', 'length' or 'tool_calls' (OpenAI's finish_reason)."""
        return finish_reason(self.final, bool(self.calls))


def finish_reason(final: _core.Event, called: bool) -> str:
    reason = results.finish_reason(final)
    return "tool_calls" if called and reason == "stop" else reason


@dataclass
class ChatTurn:
    plan: ChatPlan
    streams: list[TaskStream]
    n: int
    sampling: _core.SamplingParams | None = None  # what the turn samples with

    @property
    def n_prompt(self) -> int:
        return len(self.plan.tokens)

    async def replies(self, receive: Any = None) -> list[Reply]:
        """Fold the whole turn (``receive``: the ASGI receive, so a client that goes away
        cancels it)."""
        out = []
        for r in await results.collect(self.streams, self.n, receive):
            assert r.final is not None
            message, calls = self.plan.message(r.content)
            out.append(Reply(r.index, message, calls, r.final))
        return out

    async def stream(
        self,
    ) -> AsyncIterator[tuple[int, list[dict[str, Any]], _core.Event | None]]:
        """(completion index, OpenAI-style deltas, None) as text arrives, then (index,
        the last deltas, the final event) when a completion ends. Closing the iterator
        cancels the turn."""
        async for index, deltas, final, _ in self.stream_events():
            yield index, deltas, final

    async def stream_events(
        self, progress: bool = False
    ) -> AsyncIterator[tuple[int, list[dict[str, Any]], _core.Event | None, _core.Event]]:
        """``stream`` with the engine event each item came from (for timings); with
        ``progress``, prompt-progress events come too, with no deltas."""
        readers = {}
        async for _, ev in results.merged(self.streams, progress=progress):
            if ev.type == "progress":
                yield ev.index, [], None, ev
                continue
            reader = readers.get(ev.index)
            if reader is None:
                reader = readers[ev.index] = self.plan.deltas()
            if ev.type == "token":
                if ev.text:
                    deltas = reader.feed(ev.text.decode("utf-8", errors="replace"))
                    if deltas:
                        yield ev.index, deltas, None, ev
            else:
                yield ev.index, reader.finish(), ev, ev


async def plan_call(state: ServerState, call: ChatCall) -> ChatPlan:
    """The call's chat planned; its images and audio loaded and, with the text, tokenized
    by the projector (off the event loop)."""
    state.require()
    messages, files = await content.take_media(call.messages, state.media_rules())
    rf = call.response_format or {}
    # off the event loop: a hostile template may run up to its time bound (RELIABILITY 19)
    plan = await asyncio.to_thread(
        plan_chat,
        state,
        messages,
        tools=call.tools,
        tool_choice=call.tool_choice,
        parallel_tool_calls=call.parallel_tool_calls,
        reasoning_format=call.reasoning_format,
        add_generation_prompt=call.add_generation_prompt,
        template_kwargs=call.template_kwargs,
        continue_final=call.continue_final,
        grammar=call.sampling.grammar,
        json_schema=call.sampling.json_schema,
        response_format=rf or None,
        media=bool(files),
    )
    if files:
        plan.media = await media_prompt.tokenize(state.projector, plan.prompt, files)
        plan.tokens = list(plan.media.tokens)
    return plan


async def start_chat(state: ServerState, call: ChatCall) -> ChatTurn:
    """Plan and submit; every refusal (bad messages or media, context overflow, overload)
    raises APIError here, before any response byte."""
    plan = await plan_call(state, call)
    try:
        grammar = plan.grammar or grammar_for_response_format(call.response_format)
    except ValueError as e:
        raise APIError(400, str(e)) from e
    chat_grammar = plan.grammar is not None and grammar == plan.grammar
    lazy = plan.grammar_lazy and chat_grammar
    model = state.require()[0]
    opts = tasks.Options(
        n_predict=call.n_predict,
        n_cmpl=call.n,
        n_probs=call.n_probs,
        grammar=grammar,
        trigger_patterns=plan.trigger_patterns if lazy else [],
        trigger_tokens=plan.trigger_tokens if lazy else [],
        # the chat layer's grammar starts with the generation prompt (llama.cpp's prefill)
        grammar_prefill=prefill_tokens(model, plan.generation_prompt) if chat_grammar else [],
        preserved=plan.preserved,
        stop=[*call.stop, *plan.stops],
        cmpl_id=call.cmpl_id,
        reasoning=reasoning_budget(
            model,
            state.settings,
            call.sampling,
            plan.thinking,
            lambda: plan.generation_prompt,
            lazy_grammar=lazy,
        ),
    )
    prompt = plan.media if plan.media is not None else plan.tokens
    streams = tasks.submit(state, tasks.make_tasks(state, [prompt], call.sampling, opts))
    return ChatTurn(plan, streams, call.n, opts.sampling)
