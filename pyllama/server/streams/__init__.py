"""Resumable streams (llama-server's ``server-stream.h``): a streamed generation whose
request carries ``X-Conversation-Id`` is written into a bounded buffer that outlives the
client's connection, so ``GET /v1/stream?conv_id=&from=`` can read it again from any offset,
``DELETE /v1/stream`` stops it and ``POST /v1/streams/lookup`` tells how far it got."""

from pyllama.server.streams.registry import StreamSessions
from pyllama.server.streams.reply import sse_reply
from pyllama.server.streams.session import OffsetLost, StreamSession

__all__ = ["OffsetLost", "StreamSession", "StreamSessions", "sse_reply"]
