"""Every live resumable stream, keyed by conversation id: at most one per conversation (a
new generation replaces and stops the previous one), each kept ``TTL_S`` after it ends.

Bounded as llama-server bounds them: ``MAX_BYTES`` per session (the oldest bytes go); and
beyond llama-server, at most ``MAX_SESSIONS`` at once (the oldest finished ones go first,
then the oldest running one is stopped), so many conversation ids cannot exhaust memory."""

from __future__ import annotations

import asyncio
import logging

from pyllama.server.streams.session import StreamSession

__all__ = ["StreamSessions"]

log = logging.getLogger("pyllama.server")


class StreamSessions:
    TTL_S = 300.0  # llama-server's STREAM_SESSION_TTL_SECONDS
    MAX_BYTES = 4 * 1024 * 1024  # llama-server's STREAM_SESSION_MAX_BYTES
    MAX_SESSIONS = 256

    def __init__(self, ttl_s: float = TTL_S, max_bytes: int = MAX_BYTES) -> None:
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self._sessions: dict[str, StreamSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def create_or_replace(self, conversation_id: str) -> StreamSession:
        fresh = StreamSession(conversation_id, self.max_bytes)
        previous = self._sessions.pop(conversation_id, None)
        self._sessions[conversation_id] = fresh
        if previous is not None:
            previous.cancel()
        self._bound()
        return fresh

    def produced_by(self, session: StreamSession, task: asyncio.Task[None]) -> None:
        """``task`` writes the session; when it ends the session expires ``ttl_s`` later."""
        session.producer = task
        task.add_done_callback(lambda _: self._expire_later(session))

    def get(self, conversation_id: str) -> StreamSession | None:
        return self._sessions.get(conversation_id)

    def lookup(self, conversation_ids: list[str]) -> list[StreamSession]:
        """The sessions of the ids asked for, never others: an id matches its own session
        and the per-model ones the router's clients name ``<id>::<model>``."""
        out = []
        for rid in conversation_ids:
            prefix = rid + "::"
            out += [s for k, s in self._sessions.items() if k == rid or k.startswith(prefix)]
        return out

    def evict_and_cancel(self, conversation_id: str) -> bool:
        session = self._sessions.pop(conversation_id, None)
        if session is None:
            log.warning("stop on unknown stream session, conv_id=%s", conversation_id)
            return False
        session.cancel()
        return True

    def close(self) -> None:
        """Shutdown: stop every generation still writing and wake every reader."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            s.cancel()

    def _expire_later(self, session: StreamSession) -> None:
        session.finalize()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # the loop is closing
            return
        loop.call_later(self.ttl_s, self._expire, session)

    def _expire(self, session: StreamSession) -> None:
        if self._sessions.get(session.conversation_id) is session:
            del self._sessions[session.conversation_id]

    def _bound(self) -> None:
        excess = len(self._sessions) - self.MAX_SESSIONS
        if excess <= 0:
            return
        # finished ones first (oldest first), then running ones; dicts keep insertion order
        order = sorted(self._sessions.values(), key=lambda s: not s.done)
        for s in order[:excess]:
            del self._sessions[s.conversation_id]
            s.cancel()
