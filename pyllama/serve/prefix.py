"""A request's prompt as chained block hashes, the same for every protocol.

Replicas cache the KV of what they have evaluated, so two requests can share work only where
their prompts start with the same text. The router cannot tokenize (it has no model), so it
compares text: the prompt's parts in the order a chat template lays them out (system,
instructions, tools, then each message's role and text), cut into fixed blocks of bytes,
each block's hash chained to the one before, so that hash ``i`` stands for the whole prefix up
to block ``i``. Equal hashes at ``i`` mean equal prompts up to there; no tokenizer needed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["BLOCK_BYTES", "MAX_BLOCKS", "block_hashes", "prompt_text"]

BLOCK_BYTES = 256  # about 64 tokens of English text
MAX_BLOCKS = 512  # hash at most 128 KiB of a prompt; a longer one matches on those

# top-level fields that hold prompt text, in the order templates put them first
_FIELDS = ("system", "instructions", "tools", "functions", "messages", "input", "prompt")


def _texts(value: Any) -> Iterator[str]:
    """A field's text, depth first: a message's role, then its content's text, then the rest
    of it (tool calls, names, images) as canonical JSON."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        rest = dict(value)
        role = rest.pop("role", None)
        if isinstance(role, str):
            yield f"\x1e{role}\x1f"
        for key in ("content", "text"):
            if key in rest:
                yield from _texts(rest.pop(key))
        if rest:
            yield json.dumps(rest, sort_keys=True, ensure_ascii=False, default=str)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)
            yield "\x1f"  # [1, 23] is not [12, 3], nor ["a", "b"] "ab"
    elif value is not None:
        yield json.dumps(value)  # token ids in a /completion prompt, numbers


def prompt_text(body: Mapping[str, Any]) -> str:
    """The prompt of a JSON request body of any protocol (OpenAI, Anthropic, Responses,
    Ollama, llama-server's native routes) as one string; '' when it has none."""
    out = []
    for name in _FIELDS:
        if name in body:
            out.append(f"\x1d{name}\x1f")
            out.extend(_texts(body[name]))
    return "".join(out)


def block_hashes(
    text: str, block_bytes: int = BLOCK_BYTES, max_blocks: int = MAX_BLOCKS
) -> tuple[int, ...]:
    """Chained 64-bit hashes of the whole blocks of ``text``'s UTF-8 (a last partial block is left out:
    the next request rarely shares it)."""
    raw = text.encode("utf-8", errors="surrogatepass")
    n = min(len(raw) // block_bytes, max_blocks)
    out = []
    h = b""
    for i in range(n):
        h = hashlib.blake2b(
            h + raw[i * block_bytes : (i + 1) * block_bytes], digest_size=8
        ).digest()
        out.append(int.from_bytes(h, "little"))
    return tuple(out)
