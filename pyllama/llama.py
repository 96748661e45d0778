"""``Llama``: a synchronous, Pythonic model with OpenAI-shaped completions.

One Llama owns one model and one context (sequence 0). Calls are serialised by a lock,
so a Llama can be shared between threads; the heavy work (decode, sampling) runs with
the GIL released inside ``_core``, so other Python threads keep running meanwhile.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Union

import numpy as np

from pyllama import _core
from pyllama.chat import CHATML, ChatTemplate, tokenize_chat, validate_messages
from pyllama.engine import default_threads
from pyllama.sampling import grammar_for_response_format, make_sampling_params

__all__ = ["Llama"]

Prompt = Union[str, Sequence[int]]

POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}


class Llama:
    """A GGUF model ready to generate.

    >>> llm = Llama(pyllama.demo_model(), n_ctx=2048)
    >>> llm.create_completion("The capital of France is", max_tokens=8, temperature=0)
    """

    def __init__(
        self,
        model_path: str,
        *,
        n_ctx: int = 4096,
        n_batch: int = 2048,
        n_ubatch: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_gpu_layers: int = -1,
        use_mmap: bool = True,
        use_mlock: bool = False,
        flash_attn: bool | None = None,
        type_k: str = "f16",
        type_v: str = "f16",
        embedding: bool = False,
        pooling: str | None = None,
        seed: int = _core.DEFAULT_SEED,
        chat_template: str | None = None,
        lora_path: str | None = None,
        lora_scale: float = 1.0,
        verbose: bool = False,
    ) -> None:
        if verbose:
            _core.set_log_level(2)
        if pooling is not None and pooling not in POOLING:
            raise ValueError(f"pooling must be one of {sorted(POOLING)}")
        self.model_path = model_path
        self.model = _core.Model(
            model_path, n_gpu_layers=n_gpu_layers, use_mmap=use_mmap, use_mlock=use_mlock
        )
        self.n_threads = n_threads or default_threads()
        self._ctx_kwargs = dict(
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=min(n_ubatch, n_batch),
            n_threads=self.n_threads,
            n_threads_batch=n_threads_batch or self.n_threads,
            flash_attn=-1 if flash_attn is None else int(flash_attn),
            type_k=type_k,
            type_v=type_v,
        )
        self.ctx = _core.Context(self.model, **self._ctx_kwargs)
        self.n_ctx = self.ctx.n_ctx
        self.n_batch = self.ctx.n_batch
        self.seed = seed
        self._pooling = pooling
        self._embedding = embedding
        self._embd_ctx: _core.Context | None = None
        self._batch = _core.Batch(self.n_batch, 1)
        self._cached: list[int] = []  # tokens whose KV sits in sequence 0
        self._lock = threading.RLock()
        if lora_path:
            self._lora = _core.LoraAdapter(self.model, lora_path)
            self.ctx.set_lora([(self._lora, lora_scale)])
        template = chat_template or self.model.chat_template() or CHATML
        self.chat_template = ChatTemplate(
            template,
            bos_token=self._special_text(self.model.token_bos),
            eos_token=self._special_text(self.model.token_eos),
        )

    # ------------------------------------------------------------------ tokens
    def _special_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.model.token_to_piece(token, special=True).decode("utf-8", errors="replace")

    def tokenize(
        self, text: str | bytes, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return self.model.tokenize(text, add_special, parse_special)

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> str:
        return self.model.detokenize(list(tokens), False, special).decode("utf-8", errors="replace")

    def _prompt_tokens(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, str):
            # as llama-server: BOS when the model wants it, special tokens parsed
            tokens = self.model.tokenize(prompt, True, True)
        else:
            tokens = [int(t) for t in prompt]
            for t in tokens:
                if not 0 <= t < self.model.n_vocab:
                    raise ValueError(
                        f"token id {t} outside the vocabulary [0, {self.model.n_vocab})"
                    )
        if not tokens:
            raise ValueError("the prompt is empty")
        if len(tokens) >= self.n_ctx:
            raise ValueError(f"the prompt has {len(tokens)} tokens; the context holds {self.n_ctx}")
        return tokens

    # -------------------------------------------------------------- generation
    def _eval_prompt(self, tokens: list[int]) -> None:
        """Bring sequence 0 to exactly ``tokens``, evaluating only the uncached suffix."""
        n_keep = 0
        for a, b in zip(self._cached, tokens):
            if a != b:
                break
            n_keep += 1
        n_keep = min(n_keep, len(tokens) - 1)  # re-evaluate at least one token for its logits
        self.ctx.seq_rm(0, n_keep, -1)
        self._cached = tokens[:n_keep]
        for start in range(n_keep, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            self._batch.clear()
            self._batch.add_sequence(chunk, start, 0, start + len(chunk) == len(tokens))
            self.ctx.decode(self._batch)
            self._cached = tokens[: start + len(chunk)]

    def _advance(self, token: int) -> None:
        self._batch.clear()
        self._batch.add(token, len(self._cached), [0], True)
        self.ctx.decode(self._batch)
        self._cached.append(token)

    def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int | None = None,
        sampling: _core.SamplingParams | None = None,
        **kwargs: Any,
    ) -> Iterator[int]:
        """Yield sampled token ids until an end-of-generation token, ``max_tokens`` or a
        full context. Sampling keywords as ``create_completion`` (temperature, top_k...)."""
        params = sampling or self._sampling(**kwargs)
        tokens = self._prompt_tokens(prompt)
        with self._lock:
            chain = _core.build_sampler_chain(self.model, params, self.n_ctx)
            self._eval_prompt(tokens)
            n = 0
            while max_tokens is None or max_tokens < 0 or n < max_tokens:
                token = chain.sample(self.ctx, -1)
                if self.model.is_eog(token) and not params.ignore_eos:
                    return
                yield token
                n += 1
                if len(self._cached) >= self.n_ctx:
                    return
                self._advance(token)

    def _sampling(self, seed: int | None = None, **kwargs: Any) -> _core.SamplingParams:
        return make_sampling_params(seed=self.seed if seed is None else seed, **kwargs)

    def _run(
        self,
        tokens: list[int],
        params: _core.SamplingParams,
        max_tokens: int,
        stop: Sequence[str],
        n_logprobs: int | None,
    ) -> Iterator[dict[str, Any]]:
        """Core loop: yields {"text", "token", "logprobs"?} pieces, then a final
        {"finish_reason", "completion_tokens"}. Holds the lock for the whole run."""
        # the engine's own text stream: partial UTF-8 and stop-string prefixes held back
        assembler = _core.TextStream(list(stop))
        finish = "length"
        n = 0
        with self._lock:
            chain = _core.build_sampler_chain(self.model, params, self.n_ctx)
            self._eval_prompt(tokens)
            limit = max_tokens if max_tokens >= 0 else self.n_ctx
            while n < limit:
                logits = self.ctx.logits_ith(-1) if n_logprobs is not None else None
                token = chain.sample(self.ctx, -1)
                if self.model.is_eog(token) and not params.ignore_eos:
                    finish = "stop"
                    break
                n += 1
                piece = self.model.token_to_piece(token, False)
                out: dict[str, Any] = {"text": _text(assembler.push(piece)), "token": token}
                if logits is not None:
                    out["logprobs"] = _logprobs(logits, token, n_logprobs or 0, self._piece_text)
                yield out
                if assembler.stopped:
                    finish = "stop"
                    break
                if len(self._cached) + 1 >= self.n_ctx:
                    break  # context full: finish_reason stays "length"
                if n < limit:
                    self._advance(token)
        tail = _text(assembler.flush())
        if tail:
            yield {"text": tail, "token": None}
        yield {
            "finish_reason": finish,
            "completion_tokens": n,
            "stopping_word": assembler.stopping_word if assembler.stopped else None,
        }

    def _piece_text(self, token: int) -> str:
        return self.model.token_to_piece(token, False).decode("utf-8", errors="replace")

    # ------------------------------------------------------------ completions
    def create_completion(
        self,
        prompt: Prompt,
        max_tokens: int | None = 16,
        *,
        temperature: float = 0.8,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        grammar: str | None = None,
        json_schema: Any = None,
        logprobs: int | None = None,
        stream: bool = False,
        echo: bool = False,
        logit_bias: Mapping[Any, float] | None = None,
        model: str | None = None,
        **sampling: Any,
    ) -> Any:
        """OpenAI ``text_completion`` dict, or an iterator of chunks with ``stream=True``."""
        stops = _stops(stop)
        params = self._sampling(
            seed=seed,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            grammar=grammar,
            json_schema=json_schema,
            logit_bias=logit_bias,
            **sampling,
        )
        tokens = self._prompt_tokens(prompt)
        if logprobs is not None and not 0 <= logprobs <= 20:
            raise ValueError("logprobs must be between 0 and 20")
        if max_tokens is not None and max_tokens < -1:
            raise ValueError("max_tokens must be >= -1")
        n_max = -1 if max_tokens is None else max_tokens
        meta = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model or self.model_path,
        }
        prefix = (
            prompt
            if echo and isinstance(prompt, str)
            else (self.detokenize(tokens) if echo else "")
        )
        events = self._run(tokens, params, n_max, stops, logprobs)
        if stream:
            return self._stream_completion(events, meta, prefix, len(tokens))
        text, lp, final = _fold(events)
        choice = {
            "text": prefix + text,
            "index": 0,
            "logprobs": lp,
            "finish_reason": final["finish_reason"],
        }
        return {**meta, "choices": [choice], "usage": _usage(len(tokens), final)}

    __call__ = create_completion

    @staticmethod
    def _stream_completion(
        events: Iterator[dict[str, Any]], meta: dict[str, Any], prefix: str, n_prompt: int
    ) -> Iterator[dict[str, Any]]:
        if prefix:
            yield {
                **meta,
                "choices": [{"text": prefix, "index": 0, "logprobs": None, "finish_reason": None}],
            }
        for ev in events:
            if "finish_reason" in ev:
                yield {
                    **meta,
                    "choices": [
                        {
                            "text": "",
                            "index": 0,
                            "logprobs": None,
                            "finish_reason": ev["finish_reason"],
                        }
                    ],
                    "usage": _usage(n_prompt, ev),
                }
            elif ev["text"] or "logprobs" in ev:
                lp = _legacy_logprobs([ev]) if "logprobs" in ev else None
                yield {
                    **meta,
                    "choices": [
                        {"text": ev["text"], "index": 0, "logprobs": lp, "finish_reason": None}
                    ],
                }

    def apply_chat_template(
        self,
        messages: Any,
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        return self.chat_template.render(
            validate_messages(messages),
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            **extra,
        )

    def _chat_tokens(self, messages: list[dict[str, Any]], prompt: str) -> list[int]:
        return self._prompt_tokens(tokenize_chat(self.model, messages, prompt))

    def create_chat_completion(
        self,
        messages: Any,
        *,
        max_tokens: int | None = None,
        temperature: float = 0.8,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        grammar: str | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
        stream: bool = False,
        logit_bias: Mapping[Any, float] | None = None,
        model: str | None = None,
        **sampling: Any,
    ) -> Any:
        """OpenAI ``chat.completion`` dict, or an iterator of ``chat.completion.chunk``."""
        msgs = validate_messages(messages)
        prompt = self.chat_template.render(msgs, add_generation_prompt=True)
        rf_grammar = grammar_for_response_format(response_format)
        if rf_grammar is not None and grammar is not None:
            raise ValueError("pass either grammar or response_format, not both")
        if top_logprobs is not None and not 0 <= top_logprobs <= 20:
            raise ValueError("top_logprobs must be between 0 and 20")
        if max_tokens is not None and max_tokens < -1:
            raise ValueError("max_tokens must be >= -1")
        params = self._sampling(
            seed=seed,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            grammar=rf_grammar or grammar,
            logit_bias=logit_bias,
            **sampling,
        )
        tokens = self._chat_tokens(msgs, prompt)
        n_lp = (top_logprobs or 0) if logprobs else None
        meta = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model or self.model_path,
        }
        events = self._run(
            tokens, params, -1 if max_tokens is None else max_tokens, _stops(stop), n_lp
        )
        if stream:
            return self._stream_chat(events, meta, len(tokens))
        text, _, final = _fold(events, chat=True)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": final["finish_reason"],
        }
        if n_lp is not None:
            choice["logprobs"] = {"content": final["chat_logprobs"]}
        return {**meta, "choices": [choice], "usage": _usage(len(tokens), final)}

    @staticmethod
    def _stream_chat(
        events: Iterator[dict[str, Any]], meta: dict[str, Any], n_prompt: int
    ) -> Iterator[dict[str, Any]]:
        meta = {**meta, "object": "chat.completion.chunk"}
        yield {
            **meta,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        for ev in events:
            if "finish_reason" in ev:
                yield {
                    **meta,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {},
                            "logprobs": None,
                            "finish_reason": ev["finish_reason"],
                        }
                    ],
                    "usage": _usage(n_prompt, ev),
                }
            elif ev["text"] or "logprobs" in ev:
                lp = {"content": [_chat_logprob(ev)]} if "logprobs" in ev else None
                yield {
                    **meta,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": ev["text"]},
                            "logprobs": lp,
                            "finish_reason": None,
                        }
                    ],
                }

    # ------------------------------------------------------------- embeddings
    def _embedding_context(self) -> _core.Context:
        if self._embd_ctx is None:
            kw = dict(self._ctx_kwargs, embeddings=True, n_seq_max=16)
            kw["n_ubatch"] = kw["n_batch"]  # non-causal models need a whole input in one ubatch
            pooling = POOLING[self._pooling] if self._pooling else -1
            ctx = _core.Context(self.model, pooling=pooling, **kw)
            if ctx.pooling == 0 and self._pooling != "none":
                ctx = _core.Context(
                    self.model, pooling=POOLING["mean"], **kw
                )  # one vector per text
            self._embd_ctx = ctx
        return self._embd_ctx

    def embed(
        self, texts: str | Sequence[str], *, normalize: bool = True, truncate: bool = False
    ) -> list[list[float]]:
        """One embedding per text (L2-normalised by default), several texts per decode."""
        single = isinstance(texts, str)
        items = [texts] if single else list(texts)
        if not items:
            raise ValueError("no texts to embed")
        with self._lock:
            ctx = self._embedding_context()
            limit = min(ctx.n_batch, ctx.n_ctx)
            toks = []
            for t in items:
                tt = self.model.tokenize(t, True, True)
                if len(tt) > limit:
                    if not truncate:
                        raise ValueError(
                            f"input of {len(tt)} tokens exceeds the embedding batch of {limit}"
                        )
                    tt = tt[:limit]
                toks.append(tt or [self.model.token_bos])
            out: list[list[float]] = []
            batch = _core.Batch(limit, 1)
            i = 0
            while i < len(toks):
                batch.clear()
                seqs = 0
                while i < len(toks) and seqs < ctx.n_seq_max and len(batch) + len(toks[i]) <= limit:
                    batch.add_sequence(toks[i], 0, seqs, False)
                    for k in range(len(batch) - len(toks[i]), len(batch)):
                        batch.set_logits(k, True)
                    seqs += 1
                    i += 1
                ctx.memory_clear(True)
                ctx.decode(batch)
                for s in range(seqs):
                    v = np.array(ctx.embeddings_seq(s), dtype=np.float32)
                    if normalize:
                        norm = float(np.linalg.norm(v))
                        v = v / norm if norm > 0 else v
                    out.append(v.tolist())
            return out

    # ----------------------------------------------------------------- misc
    def reset(self) -> None:
        """Forget the cached prompt (clears the KV cache)."""
        with self._lock:
            self.ctx.memory_clear(True)
            self._cached = []

    def close(self) -> None:
        with self._lock:
            self._embd_ctx = None
            self.ctx = None  # type: ignore[assignment]

    def __enter__(self) -> Llama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _text(data: bytes) -> str:
    # whole characters by construction; "replace" only for bytes the model made invalid
    return data.decode("utf-8", errors="replace")


def _stops(stop: str | Sequence[str] | None) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if not all(isinstance(s, str) for s in stop):
        raise ValueError("stop must be a string or a list of strings")
    return list(stop)


def _usage(n_prompt: int, final: Mapping[str, Any]) -> dict[str, int]:
    n = int(final["completion_tokens"])
    return {"prompt_tokens": n_prompt, "completion_tokens": n, "total_tokens": n_prompt + n}


def _logprobs(logits: np.ndarray, token: int, top_n: int, text_of: Any) -> dict[str, Any]:
    """Pre-sampling log-probabilities of the chosen token and the top_n alternatives."""
    x = logits.astype(np.float64)
    m = x.max()
    lse = m + np.log(np.exp(x - m).sum())
    top: list[tuple[str, int, float]] = []
    if top_n > 0:
        idx = np.argpartition(-x, top_n - 1)[:top_n]
        idx = idx[np.argsort(-x[idx])]
        top = [(text_of(int(i)), int(i), float(x[i] - lse)) for i in idx]
    return {"token": text_of(token), "id": token, "logprob": float(x[token] - lse), "top": top}


def _legacy_logprobs(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    lps = [e["logprobs"] for e in events if "logprobs" in e]
    offsets, pos = [], 0
    for lp in lps:
        offsets.append(pos)
        pos += len(lp["token"])
    return {
        "tokens": [lp["token"] for lp in lps],
        "token_logprobs": [lp["logprob"] for lp in lps],
        "top_logprobs": [{t: v for t, _, v in lp["top"]} for lp in lps],
        "text_offset": offsets,
    }


def _chat_logprob(ev: Mapping[str, Any]) -> dict[str, Any]:
    lp = ev["logprobs"]
    return {
        "token": lp["token"],
        "logprob": lp["logprob"],
        "bytes": list(lp["token"].encode()),
        "top_logprobs": [
            {"token": t, "logprob": v, "bytes": list(t.encode())} for t, _, v in lp["top"]
        ],
    }


def _fold(events: Iterator[dict[str, Any]], chat: bool = False) -> tuple[str, Any, dict[str, Any]]:
    """A non-streaming answer is the fold of the stream."""
    parts, with_lp, final = [], [], {}
    for ev in events:
        if "finish_reason" in ev:
            final = dict(ev)
        else:
            parts.append(ev["text"])
            if "logprobs" in ev:
                with_lp.append(ev)
    lp = _legacy_logprobs(with_lp) if with_lp and not chat else None
    final["chat_logprobs"] = [_chat_logprob(e) for e in with_lp]
    return "".join(parts), lp, final
