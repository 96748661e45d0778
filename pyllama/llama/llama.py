"""``Llama``: llama-cpp-python's high-level API on pyllama's bindings.

One Llama owns one model and one context (sequence 0), as llama-cpp-python's does:
completions, chat, embeddings and the low-level loop (``eval``/``sample``/``generate``,
``input_ids``, ``scores``, ``save_state``) share that sequence. Calls are serialised by
a lock, so a Llama may be shared between threads, but one call runs at a time; for
concurrent callers use ``AsyncLlama`` or ``BatchedLlama`` (the batching engine). The
heavy work (decode, sampling) runs with the GIL released inside ``_core``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from pyllama import _core
from pyllama.engine import default_threads
from pyllama.llama import options
from pyllama.llama.cache import BaseLlamaCache, longest_token_prefix
from pyllama.llama.calls import chat_call, completion_call, sampler_args, with_signature
from pyllama.llama.chat.plan import plan_chat
from pyllama.llama.completion_loop import completion_pieces
from pyllama.llama.embedding import embed_texts, embedding_response
from pyllama.llama.model_info import ModelInfo, load_model
from pyllama.llama.params import ContextParams, ModelParams
from pyllama.llama.responses import ChatShaper, CompletionShaper, envelope
from pyllama.llama.sampler_chain import SamplerArgs, build_chain, grammar_text
from pyllama.llama.state import LlamaState
from pyllama.llama.tokenizer import prompt_tokens

__all__ = ["Llama"]

Prompt = Union[str, Sequence[int]]
_SAMPLER_KEYS = frozenset(SamplerArgs.__dataclass_fields__)


class Llama(ModelInfo):
    """A GGUF model, with llama-cpp-python's constructor keywords and defaults.

    >>> llm = Llama(pyllama.demo_model(), n_ctx=2048, verbose=False)
    >>> llm("Q: Name the planets in the solar system. A: ", max_tokens=32, stop=["Q:"])
    """

    def __init__(
        self,
        model_path: str,
        *,
        n_gpu_layers: int = 0,
        split_mode: int = 1,
        main_gpu: int = 0,
        tensor_split: Sequence[float] | None = None,
        vocab_only: bool = False,
        use_mmap: bool = True,
        use_mlock: bool = False,
        kv_overrides: Mapping[str, bool | int | float | str] | None = None,
        seed: int = _core.DEFAULT_SEED,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        rope_scaling_type: int | None = -1,
        pooling_type: int = -1,
        attention_type: int = -1,
        rope_freq_base: float = 0.0,
        rope_freq_scale: float = 0.0,
        yarn_ext_factor: float = -1.0,
        yarn_attn_factor: float = 1.0,
        yarn_beta_fast: float = 32.0,
        yarn_beta_slow: float = 1.0,
        yarn_orig_ctx: int = 0,
        logits_all: bool = False,
        embedding: bool = False,
        offload_kqv: bool = True,
        flash_attn: bool = False,
        op_offload: bool | None = None,
        swa_full: bool | None = None,
        no_perf: bool = False,
        last_n_tokens_size: int = 64,
        lora_base: str | None = None,
        lora_scale: float = 1.0,
        lora_path: str | None = None,
        numa: bool | str = False,
        chat_format: str | None = None,
        chat_handler: Any = None,
        draft_model: Any = None,
        tokenizer: Any = None,
        type_k: int | str | None = None,
        type_v: int | str | None = None,
        spm_infill: bool = False,
        verbose: bool = True,
        **kwargs: Any,
    ) -> None:
        init_args = {k: v for k, v in locals().items() if k not in ("self", "kwargs", "__class__")}
        # two keywords of llama.cpp's old API that integrations still pass (LangChain's
        # LlamaCpp: n_parts=-1, f16_kv=True): honoured, never dropped
        if kwargs.pop("n_parts", -1) != -1:
            raise ValueError("n_parts: a model in several files is one GGUF split, loaded whole")
        if not kwargs.pop("f16_kv", True) and type_k is None and type_v is None:
            type_k = type_v = "f32"  # the KV cache in 32-bit floats, as f16_kv=False asked
        if kwargs:
            raise TypeError(f"Llama() got unknown keyword arguments: {', '.join(sorted(kwargs))}")
        options.check_unsupported(locals())
        if op_offload is False:
            raise ValueError("op_offload=False is not supported by pyllama's Llama")
        self.model_path = model_path
        self.verbose = verbose
        if numa and os.path.exists(model_path):
            _core.numa_init(numa if isinstance(numa, str) else "distribute")
        self._model = load_model(
            model_path, verbose=verbose, n_gpu_layers=n_gpu_layers, split_mode=split_mode,
            main_gpu=main_gpu, tensor_split=tensor_split, use_mmap=use_mmap, use_mlock=use_mlock,
            kv_overrides=kv_overrides, vocab_only=vocab_only,
        )  # fmt: skip
        self.n_threads = n_threads or default_threads()
        self.n_threads_batch = n_threads_batch or self.n_threads
        self.last_n_tokens_size = last_n_tokens_size
        # as llama-cpp-python: a draft model keeps every row (logprobs then work too)
        self._logits_all = logits_all or draft_model is not None
        self._embedding = embedding
        self._seed = seed
        self.cache: BaseLlamaCache | None = None
        self.chat_handler = chat_handler
        self.draft_model = draft_model  # e.g. LlamaPromptLookupDecoding: see generate
        self._last_row = 0  # the logits row the token generate() last yielded was drawn from
        self._lock = threading.RLock()
        self.ctx: _core.Context | None = None
        self._n_ctx = n_ctx or self._model.n_ctx_train
        self.n_batch = min(self._n_ctx, n_batch)
        if not vocab_only:
            self.ctx = _core.Context(
                self._model,
                n_ctx=n_ctx,
                n_batch=self.n_batch,
                # a non-causal embedding model needs a whole input in one ubatch
                n_ubatch=self.n_batch if embedding else min(self.n_batch, n_ubatch),
                n_seq_max=16 if embedding else 1,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads_batch,
                flash_attn=int(bool(flash_attn)),
                embeddings=embedding,
                pooling=pooling_type,
                attention=attention_type,
                type_k=options.cache_type("type_k", type_k),
                type_v=options.cache_type("type_v", type_v),
                offload_kqv=offload_kqv,
                swa_full=True if swa_full is None else swa_full,
                no_perf=no_perf,
                rope_freq_base=rope_freq_base,
                rope_freq_scale=rope_freq_scale,
            )
            self._n_ctx = self.ctx.n_ctx
            self.n_batch = self.ctx.n_batch
            if lora_path:
                self._lora = _core.LoraAdapter(self._model, lora_path)
                self.ctx.set_lora([(self._lora, lora_scale)])
        self._n_vocab = self._model.n_vocab
        self._batch = _core.Batch(self.n_batch, 1)
        self.n_tokens = 0
        self.input_ids: npt.NDArray[np.intc] = np.zeros((self._n_ctx,), dtype=np.intc)
        # zeros: pages are only touched where logits land
        rows = self._n_ctx if self._logits_all else self.n_batch
        self.scores: npt.NDArray[np.single] = np.zeros((rows, self._n_vocab), dtype=np.single)
        self._requires_eval = False  # the live logits are not from a decode (after load_state)
        self._sampler: _core.Sampler | None = None
        self.metadata: dict[str, str] = dict(self._model.metadata)
        self._resolve_chat(chat_format)
        self._init_args = init_args

    # ------------------------------------------------------------------ info
    @property
    def _input_ids(self) -> npt.NDArray[np.intc]:
        return self.input_ids[: self.n_tokens]

    @property
    def _scores(self) -> npt.NDArray[np.single]:
        return self.scores[: self.n_tokens, :]

    @property
    def eval_tokens(self) -> list[int]:
        return self._input_ids.tolist()

    @property
    def eval_logits(self) -> list[list[float]]:
        return self._scores.tolist()

    @property
    def context_params(self) -> ContextParams:
        """The context's parameters (llama-cpp-python's ``context_params``), read-only."""
        a = self._init_args
        ctx = self.ctx
        return ContextParams(
            n_ctx=self._n_ctx,
            n_batch=self.n_batch,
            n_ubatch=ctx.n_ubatch if ctx is not None else a["n_ubatch"],
            n_seq_max=ctx.n_seq_max if ctx is not None else 1,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads_batch,
            embeddings=bool(a["embedding"]),
            offload_kqv=bool(a["offload_kqv"]),
            flash_attn=bool(a["flash_attn"]),
        )

    @property
    def model_params(self) -> ModelParams:
        """The model's load parameters (llama-cpp-python's ``model_params``), read-only."""
        a = self._init_args
        return ModelParams(
            n_gpu_layers=a["n_gpu_layers"], split_mode=a["split_mode"], main_gpu=a["main_gpu"],
            vocab_only=bool(a["vocab_only"]), use_mmap=bool(a["use_mmap"]),
            use_mlock=bool(a["use_mlock"]),
        )  # fmt: skip

    def pooling_type(self) -> int:
        return self._context().pooling

    def _context(self) -> _core.Context:
        if self.ctx is None:
            raise RuntimeError(
                "this Llama was loaded with vocab_only=True (or closed): it has no context"
            )
        return self.ctx

    # ------------------------------------------------------------ low level
    def set_cache(self, cache: BaseLlamaCache | None) -> None:
        self.cache = cache

    def set_seed(self, seed: int) -> None:
        self._seed = seed

    def reset(self) -> None:
        """Forget the evaluated tokens (the next ``eval`` overwrites the cache from 0)."""
        self.n_tokens = 0

    def eval(self, tokens: Sequence[int], *, all_logits: bool = False) -> None:
        """Evaluate ``tokens`` after the ``n_tokens`` already evaluated (``all_logits``:
        keep every position's logits in the context, not only the last, as a draft's
        verification needs them; ``logits_all`` always does)."""
        ctx = self._context()
        tokens = [int(t) for t in tokens]
        if self.n_tokens + len(tokens) > self._n_ctx:
            raise ValueError(
                f"evaluating {len(tokens)} tokens after {self.n_tokens} exceeds the context of {self._n_ctx}"
            )
        with self._lock:
            ctx.seq_rm(0, self.n_tokens, -1)
            for start in range(0, len(tokens), self.n_batch):
                chunk = tokens[start : start + self.n_batch]
                n_past = self.n_tokens
                self._batch.clear()
                self._batch.add_sequence(chunk, n_past, 0, True)
                if self._logits_all or all_logits:
                    for k in range(len(chunk)):
                        self._batch.set_logits(k, True)
                ctx.decode(self._batch)
                self.input_ids[n_past : n_past + len(chunk)] = chunk
                if self._logits_all:
                    for k in range(len(chunk)):
                        self.scores[n_past + k, :] = ctx.logits_ith(k)
                self.n_tokens += len(chunk)
                self._requires_eval = False

    def _chain(
        self,
        args: SamplerArgs,
        grammar: Any = None,
        triggers: list[str] | None = None,
        logit_bias: Mapping[Any, float] | None = None,
    ) -> _core.Sampler:
        return build_chain(
            self._model,
            args,
            seed=self._seed,
            last_n=self.last_n_tokens_size,
            grammar=grammar_text(grammar),
            triggers=triggers,
            logit_bias=logit_bias,
        )

    def _draw(self, chain: _core.Sampler, ridx: int, logits_processor: Any) -> int:
        ctx = self._context()
        if logits_processor:
            # Python stage first, as llama-cpp-python's custom sampler; the rest in C++
            logits = np.array(ctx.logits_ith(ridx), dtype=np.single, copy=True)
            logits = np.asarray(logits_processor(self._input_ids, logits), dtype=np.single)
            return chain.sample_logits(logits)
        return chain.sample(ctx, ridx)

    def sample(
        self,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        temp: float = 0.80,
        repeat_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_eta: float = 0.1,
        mirostat_tau: float = 5.0,
        penalize_nl: bool = True,
        logits_processor: Any = None,
        grammar: Any = None,
        idx: int | None = None,
    ) -> int:
        """Sample a token from the logits at absolute position ``idx`` (default: the last)."""
        if self.n_tokens <= 0:
            raise RuntimeError("nothing evaluated yet: call eval() first")
        with self._lock:
            chain = self._sampler
            if chain is None:
                args = SamplerArgs(
                    top_k, top_p, min_p, typical_p, temp, repeat_penalty, frequency_penalty,
                    presence_penalty, tfs_z, mirostat_mode, mirostat_tau, mirostat_eta, penalize_nl,
                )  # fmt: skip
                chain = self._chain(args, grammar)
            ridx = idx - self.n_tokens if idx is not None else -1
            return self._draw(chain, ridx, logits_processor)

    def generate(
        self,
        tokens: Sequence[int] | str,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        temp: float = 0.80,
        repeat_penalty: float = 1.0,
        reset: bool = True,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        penalize_nl: bool = True,
        logits_processor: Any = None,
        stopping_criteria: Any = None,
        grammar: Any = None,
        *,
        logit_bias: Mapping[Any, float] | None = None,
        grammar_triggers: list[str] | None = None,
    ) -> Iterator[int]:
        """Yield sampled tokens without end (end-of-generation tokens included): the caller
        stops. ``send(tokens)`` appends tokens after the one just yielded. With ``reset``
        the longest prefix already evaluated is kept. A str is tokenized first (pyllama)."""
        args = SamplerArgs(
            top_k, top_p, min_p, typical_p, temp, repeat_penalty, frequency_penalty,
            presence_penalty, tfs_z, mirostat_mode, mirostat_tau, mirostat_eta, penalize_nl,
        )  # fmt: skip
        if isinstance(tokens, str):
            tokens = self._model.tokenize(tokens, True, True)
        with self._lock:
            chain = self._chain(args, grammar, grammar_triggers, logit_bias)
            toks = [int(t) for t in tokens]
            if reset and self.n_tokens > 0:
                prefix = longest_token_prefix(self._input_ids.tolist(), toks)
                consumed = prefix == len(toks)
                if consumed and self.n_tokens == len(toks) and not self._requires_eval:
                    reset, toks = False, []  # the live logits are this prompt's: sample now
                else:
                    keep = prefix - 1 if consumed else prefix  # re-decode one for its logits
                    if keep > 0:
                        reset, toks = False, toks[keep:]
                        self.n_tokens = keep
                        self._context().seq_rm(0, keep, -1)
                        self._requires_eval = True
            if reset:
                self.reset()
            sample_idx = self.n_tokens + len(toks) - 1
            verify = False  # toks holds tokens to check after the first: every row's logits
            while True:
                self.eval(toks, all_logits=verify)
                while sample_idx < self.n_tokens:
                    token = self._draw(chain, sample_idx - self.n_tokens, logits_processor)
                    sample_idx += 1
                    self._last_row = sample_idx - 1
                    if stopping_criteria is not None:
                        row = (
                            self.scores[min(sample_idx - 1, len(self.scores) - 1)]
                            if self._logits_all
                            else self.scores[0]
                        )
                        if stopping_criteria(self._input_ids[:sample_idx], row):
                            return
                    extra = yield token
                    if (
                        not extra
                        and self.draft_model is not None
                        and (sample_idx >= self.n_tokens or token != self.input_ids[sample_idx])
                    ):  # the rows evaluated are used up or the rest are wrong: draft anew
                        extra = self._drafted(token, sample_idx)
                    toks = [token, *(int(t) for t in (extra or ()))]
                    verify = len(toks) > 1
                    if sample_idx < self.n_tokens and token != self.input_ids[sample_idx]:
                        self.n_tokens = sample_idx
                        self._context().seq_rm(0, self.n_tokens, -1)
                        self._requires_eval = True
                        break

    def _drafted(self, token: int, at: int) -> list[int]:
        """The draft model's tokens to follow ``token`` (placed at ``at``), as many as fit
        the context and one batch beside it."""
        assert self.draft_model is not None
        history = np.append(self.input_ids[:at], np.intc(token))
        room = min(self._n_ctx - at - 1, self.n_batch - 1)
        return [int(t) for t in self.draft_model(history)][: max(0, room)]

    # ----------------------------------------------------------------- state
    def save_state(self) -> LlamaState:
        with self._lock:
            data = self._context().seq_state_get(0)
            rows = self.n_tokens if self._logits_all else 0
            return LlamaState(
                input_ids=self.input_ids.copy(),
                scores=self.scores[:rows, :].copy(),
                n_tokens=self.n_tokens,
                llama_state=data,
                llama_state_size=len(data),
                seed=self._seed,
            )

    def load_state(self, state: LlamaState) -> None:
        with self._lock:
            ctx = self._context()
            ctx.seq_rm(0, -1, -1)
            ctx.seq_state_set(state.llama_state, 0)
            self.input_ids[:] = state.input_ids
            if len(state.scores):
                self.scores[: len(state.scores), :] = state.scores
            self.n_tokens = state.n_tokens
            self._seed = state.seed
            self._requires_eval = True

    # ----------------------------------------------------------- completions
    def _tokens_for(self, prompt: Prompt, suffix: str | None) -> list[int]:
        tokens = prompt_tokens(self._model, prompt, suffix)
        if len(tokens) >= self._n_ctx:
            raise ValueError(
                f"Requested tokens ({len(tokens)}) exceed context window of {self._n_ctx}"
            )
        return tokens

    def _piece_text(self, token: int) -> str:
        return self._model.token_to_piece(token, False).decode("utf-8", errors="replace")

    @with_signature(completion_call)
    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        """A ``text_completion`` dict, or an iterator of chunks with ``stream=True``."""
        call = completion_call(*args, **kwargs)
        prompt, logprobs = call["prompt"], call["logprobs"]
        if logprobs is not None and not logprobs >= 0:
            raise ValueError("logprobs must be >= 0")
        tokens = self._tokens_for(prompt, call["suffix"])
        args_ = sampler_args(call)
        args_.check()
        pieces = completion_pieces(
            self,
            tokens, max_tokens=call["max_tokens"], stop=call["stop"], n_logprobs=logprobs,
            seed=call["seed"], args=args_, stopping_criteria=call["stopping_criteria"],
            logits_processor=call["logits_processor"], grammar=call["grammar"], triggers=None,
            logit_bias=call["logit_bias"],
        )  # fmt: skip
        prefix = ""
        if call["echo"]:
            prefix = (
                prompt
                if isinstance(prompt, str)
                else self.detokenize(tokens).decode("utf-8", errors="replace")
            )
        meta = envelope("text_completion", call["model"] or self.model_path)
        shaper = CompletionShaper(meta, len(tokens), prefix, len(prefix))
        if call["stream"]:
            return self._stream_completion(shaper, pieces, prefix)
        return shaper.response(pieces)

    @staticmethod
    def _stream_completion(
        shaper: CompletionShaper, pieces: Iterator[dict[str, Any]], prefix: str
    ) -> Iterator[dict[str, Any]]:
        if prefix:
            yield shaper._choice(prefix, None, None)
        yield from shaper.chunks(pieces)

    __call__ = create_completion

    # ------------------------------------------------------------------ chat
    @with_signature(chat_call)
    def create_chat_completion(self, *args: Any, **kwargs: Any) -> Any:
        """A ``chat.completion`` dict, or an iterator of ``chat.completion.chunk`` s."""
        call = chat_call(*args, **kwargs)
        if self.chat_handler is not None:
            return self.chat_handler(llama=self, **call)
        plan = plan_chat(
            self._model, self._template, call["messages"],
            functions=call["functions"], function_call=call["function_call"], tools=call["tools"],
            tool_choice=call["tool_choice"], response_format=call["response_format"],
            grammar=grammar_text(call["grammar"]),
        )  # fmt: skip
        if len(plan.tokens) >= self._n_ctx:
            raise ValueError(
                f"Requested tokens ({len(plan.tokens)}) exceed context window of {self._n_ctx}"
            )
        args_ = sampler_args(call)
        args_.check()
        logprobs = call["logprobs"]
        pieces = completion_pieces(
            self,
            plan.tokens, max_tokens=call["max_tokens"], stop=_with_stops(call["stop"], plan.stops),
            n_logprobs=(call["top_logprobs"] or 0) if logprobs else None, seed=call["seed"], args=args_,
            stopping_criteria=None, logits_processor=call["logits_processor"], grammar=plan.grammar,
            triggers=None, logit_bias=call["logit_bias"], preserved=plan.preserved,
        )  # fmt: skip
        meta = envelope("chat.completion", call["model"] or self.model_path)
        shaper = ChatShaper(meta, plan, bool(logprobs))
        if call["stream"]:
            return shaper.chunks(pieces)
        return shaper.response(pieces, len(plan.tokens))

    def apply_chat_template(
        self, messages: Any, add_generation_prompt: bool = True, tools: Any = None, **extra: Any
    ) -> str:
        """The prompt text the chat template makes of ``messages`` (pyllama)."""
        return self._template.render(
            messages, add_generation_prompt=add_generation_prompt, tools=tools, **extra
        )

    # ------------------------------------------------------------ embeddings
    def embed(
        self,
        input: str | list[str],
        normalize: bool = False,
        truncate: bool = True,
        return_count: bool = False,
    ) -> Any:
        """One vector for a str, a list of vectors for a list (per-token vectors when the
        model pools nothing). Needs ``embedding=True``. Clears the evaluated tokens."""
        if not self._embedding:
            raise RuntimeError(
                "Llama model must be created with embedding=True to call this method"
            )
        with self._lock:
            vectors, total = embed_texts(
                self._model, self._context(), input, self.n_batch, normalize, truncate
            )
            self.n_tokens = 0
        out = vectors[0] if isinstance(input, str) else vectors
        return (out, total) if return_count else out

    def create_embedding(self, input: str | list[str], model: str | None = None) -> dict[str, Any]:
        items = input if isinstance(input, list) else [input]
        vectors, total = self.embed(items, return_count=True)
        return embedding_response(vectors, total, model or self.model_path)

    # ------------------------------------------------------------------ misc
    @staticmethod
    def logits_to_logprobs(logits: npt.ArrayLike, axis: int = -1) -> npt.NDArray[np.single]:
        x = np.asarray(logits, dtype=np.single)
        m = np.max(x, axis=axis, keepdims=True)
        out = x - m
        with np.errstate(divide="ignore"):
            out -= np.log(np.sum(np.exp(out), axis=axis, keepdims=True))
        return out

    @staticmethod
    def longest_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
        return longest_token_prefix(a, b)

    @classmethod
    def from_pretrained(
        cls,
        repo_id: str,
        filename: str | None,
        additional_files: list[str] | None = None,
        local_dir: str | None = None,
        local_dir_use_symlinks: bool | str = "auto",
        cache_dir: str | None = None,
        **kwargs: Any,
    ) -> Llama:
        """Download ``filename`` (a glob matching one file) of a hub repository into
        llama.cpp's cache, as ``-hf``/``-hff`` do, and load it."""
        from pyllama.llama.pretrained import fetch

        path = fetch(repo_id, filename, additional_files, local_dir, cache_dir)
        return cls(model_path=str(path), **kwargs)

    def close(self) -> None:
        with self._lock:
            self.ctx = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()

    def __enter__(self) -> Llama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return dict(self._init_args)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


def _with_stops(stop: Any, extra: list[str]) -> Any:
    """The call's stop strings and the template's own (llama.cpp's additional stops)."""
    if not extra:
        return stop
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    return [*stops, *extra]
