"""``BatchedLlama``: llama-cpp-python's synchronous calls over the batching engine, for
frameworks that serve requests from threads.

Every method may be called from any thread at once: each call blocks its own thread
(without the GIL) on its task's events while the engine decodes all running calls in
shared batches. A stream abandoned or closed early cancels its task and frees the slot.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyllama.engine import EngineError, generate
from pyllama.llama.calls import chat_call, completion_call, with_signature
from pyllama.llama.embedding import embedding_response
from pyllama.llama.engine_front import CallJob, EngineLlama

__all__ = ["BatchedLlama"]


class BatchedLlama(EngineLlama):
    """Keywords as ``Llama`` plus ``n_parallel``; thread-safe, blocking methods."""

    def __init__(self, model_path: str, *, timeout_s: float = 600.0, **kwargs: Any) -> None:
        super().__init__(model_path, **kwargs)
        self.timeout_s = timeout_s

    def _pieces(self, job: CallJob) -> Iterator[dict[str, Any]]:
        events = generate(self.engine, job.task, self.timeout_s)  # cancels the task when closed
        try:
            for ev in events:
                if ev.type == "error":
                    raise EngineError(ev.error_kind, ev.message)
                if ev.type == "token":
                    yield self._token_piece(ev, job)
                elif ev.done:
                    yield self._final_piece(ev)
        finally:
            events.close()

    @staticmethod
    def _completion_chunks(
        job: CallJob, pieces: Iterator[dict[str, Any]]
    ) -> Iterator[dict[str, Any]]:
        if job.prefix:
            yield job.shaper._choice(job.prefix, None, None)  # type: ignore[union-attr]
        yield from job.shaper.chunks(pieces)

    @with_signature(completion_call)
    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        """A ``text_completion`` dict; with ``stream=True`` an iterator of chunks."""
        call = completion_call(*args, **kwargs)
        job = self._completion_job(call)
        pieces = self._pieces(job)
        if call["stream"]:
            return self._completion_chunks(job, pieces)
        return job.shaper.response(pieces)  # type: ignore[call-arg]

    __call__ = create_completion

    @with_signature(chat_call)
    def create_chat_completion(self, *args: Any, **kwargs: Any) -> Any:
        """A ``chat.completion`` dict; with ``stream=True`` an iterator of chunks."""
        call = chat_call(*args, **kwargs)
        job = self._chat_job(call)
        pieces = self._pieces(job)
        if call["stream"]:
            return job.shaper.chunks(pieces)
        return job.shaper.response(pieces, job.n_prompt)  # type: ignore[call-arg]

    def embed(
        self,
        input: str | list[str],
        normalize: bool = False,
        truncate: bool = True,
        return_count: bool = False,
    ) -> Any:
        texts = [input] if isinstance(input, str) else list(input)
        tasks, total = self._embedding_tasks(texts, normalize, truncate)
        vectors = []
        for task in tasks:
            final = None
            for ev in generate(self.engine, task, self.timeout_s):
                if ev.type == "error":
                    raise EngineError(ev.error_kind, ev.message)
                final = ev
            assert final is not None
            vectors.append(self._vector(final))
        out = vectors[0] if isinstance(input, str) else vectors
        return (out, total) if return_count else out

    def create_embedding(self, input: str | list[str], model: str | None = None) -> dict[str, Any]:
        vectors, total = self.embed(
            input if isinstance(input, list) else [input], return_count=True
        )
        return embedding_response(vectors, total, model or self.model_path)

    def __enter__(self) -> BatchedLlama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
