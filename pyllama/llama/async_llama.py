"""``AsyncLlama``: llama-cpp-python's calls as coroutines over the batching engine.

    llm = AsyncLlama(model_path, n_parallel=8, n_ctx=2048)
    out = await llm.create_chat_completion(messages=[...])            # a dict
    async for chunk in await llm.create_completion("Once", stream=True):
        ...

Concurrent calls from one event loop are decoded together, as pyllama-server's requests
are. Closing a stream early (``aclose``, ``break`` out of ``async for`` and letting it go)
cancels its task and frees its slot at once. Events reach the loop through the engine's
wake-up pipe (``AsyncEngine``): no thread per call, and the GIL is held only to move
finished events around.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pyllama.engine import AsyncEngine, EngineError, TaskStream
from pyllama.llama.calls import chat_call, completion_call, with_signature
from pyllama.llama.embedding import embedding_response
from pyllama.llama.engine_front import CallJob, EngineLlama

__all__ = ["AsyncLlama"]


class AsyncLlama(EngineLlama):
    """Keywords as ``Llama`` plus ``n_parallel`` (callers decoded at once, each with
    ``n_ctx`` tokens of context). Use it from one event loop."""

    def __init__(self, model_path: str, **kwargs: Any) -> None:
        super().__init__(model_path, **kwargs)
        self._aengine = AsyncEngine(self.engine)

    async def _pieces(self, job: CallJob, stream: TaskStream) -> AsyncIterator[dict[str, Any]]:
        async with stream:
            async for ev in stream:
                if ev.type == "error":
                    raise EngineError(ev.error_kind, ev.message)
                if ev.type == "token":
                    yield self._token_piece(ev, job)
                elif ev.done:
                    yield self._final_piece(ev)

    async def _completion_chunks(
        self, job: CallJob, stream: TaskStream
    ) -> AsyncIterator[dict[str, Any]]:
        shaper = job.shaper
        if job.prefix:
            yield shaper._choice(job.prefix, None, None)  # type: ignore[union-attr]
        async for piece in self._pieces(job, stream):
            chunk = shaper.chunk(piece)  # type: ignore[union-attr]
            if chunk is not None:
                yield chunk

    async def _chat_chunks(self, job: CallJob, stream: TaskStream) -> AsyncIterator[dict[str, Any]]:
        async for piece in self._pieces(job, stream):
            for chunk in job.shaper.chunks_for(piece):  # type: ignore[union-attr]
                yield chunk

    @with_signature(completion_call)
    async def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        """A ``text_completion`` dict; with ``stream=True`` an async iterator of chunks."""
        call = completion_call(*args, **kwargs)
        job = self._completion_job(call)
        stream = self._aengine.submit(job.task)
        if call["stream"]:
            return self._completion_chunks(job, stream)
        return job.shaper.response([p async for p in self._pieces(job, stream)])  # type: ignore[call-arg]

    __call__ = create_completion

    @with_signature(chat_call)
    async def create_chat_completion(self, *args: Any, **kwargs: Any) -> Any:
        """A ``chat.completion`` dict; with ``stream=True`` an async iterator of chunks."""
        call = chat_call(*args, **kwargs)
        job = self._chat_job(call)
        stream = self._aengine.submit(job.task)
        if call["stream"]:
            return self._chat_chunks(job, stream)
        pieces = [p async for p in self._pieces(job, stream)]
        return job.shaper.response(pieces, job.n_prompt)  # type: ignore[call-arg]

    async def embed(
        self,
        input: str | list[str],
        normalize: bool = False,
        truncate: bool = True,
        return_count: bool = False,
    ) -> Any:
        texts = [input] if isinstance(input, str) else list(input)
        tasks, total = self._embedding_tasks(texts, normalize, truncate)
        vectors = []
        for stream in self._aengine.submit_many(tasks):
            _, final = await self._aengine.collect(stream)
            vectors.append(self._vector(final))
        out = vectors[0] if isinstance(input, str) else vectors
        return (out, total) if return_count else out

    async def create_embedding(
        self, input: str | list[str], model: str | None = None
    ) -> dict[str, Any]:
        vectors, total = await self.embed(
            input if isinstance(input, list) else [input], return_count=True
        )
        return embedding_response(vectors, total, model or self.model_path)

    def close(self) -> None:
        self._aengine.close()

    async def __aenter__(self) -> AsyncLlama:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
