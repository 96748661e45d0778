"""From sampled token bytes to text that is safe to show.

Two things must never reach a reader: half of a multi-byte UTF-8 character (a token may
end inside one) and any part of a stop string. ``TextAssembler`` holds both back until
they resolve, so streamed pieces concatenate to exactly the final text.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

__all__ = ["TextAssembler"]


class TextAssembler:
    def __init__(self, stops: Sequence[str] = ()) -> None:
        self.stops = [s for s in stops if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # decoded text not yet emitted (may hold a stop prefix)
        self.stopped_by: str | None = None

    def push(self, piece: bytes) -> str:
        """Add one token's bytes; return the text that can be emitted now.

        After a stop string is seen, ``stopped_by`` is set and the text before it is
        returned; the stop string and anything after it are dropped.
        """
        if self.stopped_by is not None:
            return ""
        self._pending += self._decoder.decode(piece)
        if not self._pending:
            return ""
        cut, stop = self._first_stop()
        if stop is not None:
            self.stopped_by = stop
            out, self._pending = self._pending[:cut], ""
            return out
        keep = self._longest_stop_prefix_suffix()
        out = self._pending[: len(self._pending) - keep]
        self._pending = self._pending[len(out) :]
        return out

    def flush(self) -> str:
        """End of generation: release whatever is held (an unfinished stop prefix is text)."""
        if self.stopped_by is not None:
            return ""
        out = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        return out

    def _first_stop(self) -> tuple[int, str | None]:
        best, found = len(self._pending) + 1, None
        for s in self.stops:
            i = self._pending.find(s)
            if i != -1 and i < best:
                best, found = i, s
        return best, found

    def _longest_stop_prefix_suffix(self) -> int:
        """Length of the longest tail of pending text that begins some stop string."""
        text, keep = self._pending, 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(text)), keep, -1):
                if text.endswith(s[:n]):
                    keep = n
                    break
        return keep
