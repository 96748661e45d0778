"""llama-cpp-python's response dicts (OpenAI-shaped), built from generation pieces.

Every generation loop (``Llama``'s own, the engine's for ``AsyncLlama``/``BatchedLlama``)
produces the same pieces: ``{"text", "token", "logprobs"}`` per token, with logprobs
``{"token", "logprob", "top": [(text, id, logprob)...]}`` or None, then one final
``{"finish_reason", "completion_tokens"}``. The shapers here turn them into a response
or stream chunks, so that every front answers in the same shape.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from pyllama.llama.chat.plan import ChatPlan

__all__ = ["ChatShaper", "CompletionShaper", "envelope", "token_logprobs"]

Piece = Mapping[str, Any]


def envelope(kind: str, model: str) -> dict[str, Any]:
    prefix = "cmpl" if kind == "text_completion" else "chatcmpl"
    return {
        "id": f"{prefix}-{uuid.uuid4()}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
    }


def usage(n_prompt: int, n_completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": n_prompt,
        "completion_tokens": n_completion,
        "total_tokens": n_prompt + n_completion,
    }


def token_logprobs(
    logits: npt.NDArray[np.float32], token: int, top_n: int, text_of: Any
) -> dict[str, Any]:
    """Log-probabilities (before sampling) of the chosen token and the top_n others."""
    x = logits.astype(np.float64)
    m = x.max()
    lse = m + np.log(np.exp(x - m).sum())
    top: list[tuple[str, int, float]] = []
    if top_n > 0:
        idx = np.argpartition(-x, top_n - 1)[:top_n]
        idx = idx[np.argsort(-x[idx])]
        top = [(text_of(int(i)), int(i), float(x[i] - lse)) for i in idx]
    return {"token": text_of(token), "logprob": float(x[token] - lse), "top": top}


def _legacy(lps: list[dict[str, Any]], offset: int) -> dict[str, Any]:
    """The text-completion ``logprobs`` object; each top dict also holds the chosen token."""
    offsets = []
    for lp in lps:
        offsets.append(offset)
        offset += len(lp["token"])
    tops = []
    for lp in lps:
        d = {t: v for t, _, v in lp["top"]}
        d[lp["token"]] = lp["logprob"]
        tops.append(d)
    return {
        "tokens": [lp["token"] for lp in lps],
        "text_offset": offsets,
        "token_logprobs": [lp["logprob"] for lp in lps],
        "top_logprobs": tops,
    }


def _chat_logprob(lp: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "token": lp["token"],
        "logprob": lp["logprob"],
        "bytes": list(lp["token"].encode()),
        "top_logprobs": [
            {"token": t, "logprob": v, "bytes": list(t.encode())} for t, _, v in lp["top"]
        ],
    }


class CompletionShaper:
    """``text_completion`` responses and chunks."""

    def __init__(
        self, meta: dict[str, Any], n_prompt: int, prefix: str = "", text_offset: int = 0
    ) -> None:
        self.meta = meta
        self.n_prompt = n_prompt
        self.prefix = prefix  # echo: the prompt's text before the completion
        self.offset = text_offset

    def _choice(self, text: str, logprobs: Any, finish: str | None) -> dict[str, Any]:
        return {
            **self.meta,
            "choices": [{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}],
        }

    def chunk(self, piece: Piece) -> dict[str, Any] | None:
        """One stream chunk per piece (None for a piece with nothing to say)."""
        if "finish_reason" in piece:
            return self._choice("", None, piece["finish_reason"])
        lp = piece.get("logprobs")
        if not piece["text"] and lp is None:
            return None
        legacy = _legacy([lp], self.offset) if lp is not None else None
        self.offset += len(piece["text"])
        return self._choice(piece["text"], legacy, None)

    def chunks(self, pieces: Iterable[Piece]) -> Iterable[dict[str, Any]]:
        for piece in pieces:
            c = self.chunk(piece)
            if c is not None:
                yield c

    def response(self, pieces: Iterable[Piece]) -> dict[str, Any]:
        text, lps, final = [], [], {}
        for p in pieces:
            if "finish_reason" in p:
                final = p
                continue
            text.append(p["text"])
            if p.get("logprobs") is not None:
                lps.append(p["logprobs"])
        logprobs = _legacy(lps, self.offset) if lps else None
        out = self._choice(self.prefix + "".join(text), logprobs, final["finish_reason"])
        out["usage"] = usage(self.n_prompt, final["completion_tokens"])
        return out


class ChatShaper:
    """``chat.completion`` responses and ``chat.completion.chunk`` s."""

    def __init__(self, meta: dict[str, Any], plan: ChatPlan, want_logprobs: bool) -> None:
        self.meta = meta
        self.plan = plan
        self.want_logprobs = want_logprobs
        self.reader = plan.reader()
        self.started = False

    def _chunk(
        self, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None
    ) -> dict[str, Any]:
        return {
            **self.meta,
            "object": "chat.completion.chunk",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            ],
        }

    def chunks_for(self, piece: Piece) -> list[dict[str, Any]]:
        out = []
        if not self.started:
            self.started = True
            out.append(self._chunk({"role": "assistant"}))
        if "finish_reason" in piece:
            out += [self._chunk(d) for d in self.reader.finish()]
            finish = "tool_calls" if self.reader.n_calls else piece["finish_reason"]
            out.append(self._chunk({}, finish))
            return out
        deltas = self.reader.feed(piece["text"])
        lp = piece.get("logprobs")
        if lp is not None and self.want_logprobs:
            deltas = deltas or [{"content": ""}]
            out.append(
                self._chunk(deltas[0], logprobs={"content": [_chat_logprob(lp)], "refusal": None})
            )
            deltas = deltas[1:]
        out += [self._chunk(d) for d in deltas]
        return out

    def chunks(self, pieces: Iterable[Piece]) -> Iterable[dict[str, Any]]:
        for piece in pieces:
            yield from self.chunks_for(piece)

    def response(self, pieces: Iterable[Piece], n_prompt: int) -> dict[str, Any]:
        text, lps, final = [], [], {}
        for p in pieces:
            if "finish_reason" in p:
                final = p
                continue
            text.append(p["text"])
            if p.get("logprobs") is not None:
                lps.append(p["logprobs"])
        message, called = self.plan.message("".join(text))
        logprobs = (
            {"content": [_chat_logprob(lp) for lp in lps], "refusal": None}
            if self.want_logprobs
            else None
        )
        choice = {
            "index": 0,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": "tool_calls" if called else final["finish_reason"],
        }
        return {
            **self.meta,
            "choices": [choice],
            "usage": usage(n_prompt, final["completion_tokens"]),
        }
