"""What ``AsyncLlama`` and ``BatchedLlama`` share: llama-cpp-python's keywords to the
batching engine (``n_parallel`` slots, each with ``n_ctx`` tokens of context), and each
call to an engine task plus the shaper that turns its events into a response.

The engine runs its own thread and decodes every running task's next token in one batch,
so callers that overlap share decode steps. Per-token Python hooks (``logits_processor``,
``stopping_criteria``) cannot run there: they raise, naming ``Llama``.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from pyllama import _core
from pyllama.engine import default_threads, make_task
from pyllama.llama import media, options
from pyllama.llama.calls import sampler_args
from pyllama.llama.chat.plan import ChatPlan, plan_chat
from pyllama.llama.model_info import ModelInfo, load_model
from pyllama.llama.responses import ChatShaper, CompletionShaper, envelope
from pyllama.llama.sampler_chain import ChatGrammar, SamplerArgs, grammar_text
from pyllama.llama.tokenizer import prompt_tokens
from pyllama.sampling import make_sampling_params

__all__ = ["CallJob", "EngineLlama"]

Prompt = Union[str, Sequence[int]]


@dataclass
class CallJob:
    """One call as an engine task, and how to answer it."""

    task: _core.TaskParams
    shaper: CompletionShaper | ChatShaper
    n_prompt: int
    n_top: int | None  # logprobs wanted: this many alternatives
    preserved: Sequence[int] = ()
    prefix: str = ""  # echo


def _no_hooks(logits_processor: Any, stopping_criteria: Any) -> None:
    for name, value in (
        ("logits_processor", logits_processor),
        ("stopping_criteria", stopping_criteria),
    ):
        if value:
            raise ValueError(
                f"{name} runs Python at every token, which the batching engine cannot do: "
                "use pyllama.Llama for it"
            )


class EngineLlama(ModelInfo):
    """Model, engine and chat template; the calls as tasks. Subclasses run them."""

    def __init__(
        self,
        model_path: str,
        *,
        n_parallel: int = 8,
        n_gpu_layers: int = 0,
        split_mode: int = 1,
        main_gpu: int = 0,
        tensor_split: Sequence[float] | None = None,
        use_mmap: bool = True,
        use_mlock: bool = False,
        kv_overrides: Mapping[str, bool | int | float | str] | None = None,
        seed: int = _core.DEFAULT_SEED,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        pooling_type: int = -1,
        rope_freq_base: float = 0.0,
        rope_freq_scale: float = 0.0,
        logits_all: bool = False,
        embedding: bool = False,
        offload_kqv: bool = True,
        flash_attn: bool = False,
        swa_full: bool | None = None,
        last_n_tokens_size: int = 64,
        lora_path: str | None = None,
        lora_scale: float = 1.0,
        chat_format: str | None = None,
        type_k: int | str | None = None,
        type_v: int | str | None = None,
        ngram: _core.NgramSpec | None = None,
        verbose: bool = True,
        model: _core.Model | None = None,
        clip_model_path: str | None = None,
    ) -> None:
        """``model``: one already loaded (a ``Llama``'s), shared rather than loaded again;
        ``clip_model_path``: a multimodal projector, for images and audio in chat messages."""
        if n_parallel < 1:
            raise ValueError("n_parallel must be at least 1")
        self.model_path = model_path
        self.verbose = verbose
        self._model = model or load_model(
            model_path, verbose=verbose, n_gpu_layers=n_gpu_layers, split_mode=split_mode,
            main_gpu=main_gpu, tensor_split=tensor_split, use_mmap=use_mmap, use_mlock=use_mlock,
            kv_overrides=kv_overrides,
        )  # fmt: skip
        n_ctx = n_ctx or self._model.n_ctx_train
        self.n_parallel = n_parallel
        self.n_threads = n_threads or default_threads()
        self.last_n_tokens_size = last_n_tokens_size
        self._embedding = embedding
        self._n_ctx = n_ctx
        self.n_batch = min(n_batch, n_ctx * n_parallel)
        self._projector = (
            # its marker is the one llama.cpp's chat layer renders media parts as
            _core.Projector(
                self._model,
                clip_model_path,
                n_threads=self.n_threads,
                marker=_core.chat_media_marker(),
            )
            if clip_model_path
            else None
        )
        # a KV stream of n_ctx per caller (as llama-server with -np): in one unified cache a
        # caller's attention would span every caller's cells, a third slower once all are used
        self.engine = _core.Engine(
            self._model,
            n_parallel=n_parallel,
            n_ctx=n_ctx * n_parallel,
            n_ctx_slot_max=n_ctx,
            kv_unified=False,
            n_batch=self.n_batch,
            n_ubatch=self.n_batch if embedding else min(n_ubatch, self.n_batch),
            n_threads=self.n_threads,
            n_threads_batch=n_threads_batch or self.n_threads,
            flash_attn=int(bool(flash_attn)),
            embeddings=embedding,
            pooling=pooling_type,
            type_k=options.cache_type("type_k", type_k),
            type_v=options.cache_type("type_v", type_v),
            offload_kqv=offload_kqv,
            swa_full=True if swa_full is None else swa_full,
            rope_freq_base=rope_freq_base,
            rope_freq_scale=rope_freq_scale,
            lora=[(lora_path, lora_scale)] if lora_path else [],
            ngram=ngram,
            cache_ram_mib=0,
            projector=self._projector,
        )
        self._seed = seed
        self._seed_lock = threading.Lock()
        self.metadata: dict[str, str] = dict(self._model.metadata)
        self._resolve_chat(chat_format)

    def set_seed(self, seed: int) -> None:
        with self._seed_lock:
            self._seed = seed

    def metrics(self) -> dict[str, Any]:
        """The engine's counters (decode steps, tokens per batch...)."""
        return dict(self.engine.metrics())

    def _next_seed(self, seed: int | None) -> int:
        # as llama-cpp-python: each unseeded call draws the next seed from the last one
        with self._seed_lock:
            self._seed = seed if seed is not None else random.Random(self._seed).randint(0, 2**32)
            return self._seed & 0xFFFFFFFF

    # ------------------------------------------------------------------ jobs
    def _sampling(
        self, args: SamplerArgs, seed: int | None, grammar: Any, logit_bias: Any
    ) -> _core.SamplingParams:
        args.check()
        if args.temp < 0:
            raise ValueError("temperature < 0 is not supported by the engine (use 0 for greedy)")
        return make_sampling_params(
            seed=self._next_seed(seed),
            temperature=args.temp,
            top_k=args.top_k,
            top_p=args.top_p,
            min_p=args.min_p,
            typical_p=args.typical_p,
            repeat_penalty=args.repeat_penalty,
            repeat_last_n=self.last_n_tokens_size,
            frequency_penalty=args.frequency_penalty,
            presence_penalty=args.presence_penalty,
            mirostat=args.mirostat_mode,
            mirostat_tau=args.mirostat_tau,
            mirostat_eta=args.mirostat_eta,
            grammar=grammar,
            logit_bias=logit_bias,
        )

    def _n_predict(self, max_tokens: int | None, n_prompt: int) -> int:
        room = self._n_ctx - n_prompt
        if max_tokens is None or max_tokens <= 0:
            return room
        return min(max_tokens, room)

    def _completion_job(self, call: Mapping[str, Any]) -> CallJob:
        """A bound ``completion_call`` as a task."""
        _no_hooks(call["logits_processor"], call["stopping_criteria"])
        prompt, logprobs = call["prompt"], call["logprobs"]
        tokens = prompt_tokens(self._model, prompt, call["suffix"])
        if len(tokens) >= self._n_ctx:
            raise ValueError(
                f"Requested tokens ({len(tokens)}) exceed context window of {self._n_ctx}"
            )
        if logprobs is not None and logprobs < 0:
            raise ValueError("logprobs must be >= 0")
        params = self._sampling(
            sampler_args(call), call["seed"], grammar_text(call["grammar"]), call["logit_bias"]
        )
        task = make_task(
            tokens,
            n_predict=self._n_predict(call["max_tokens"], len(tokens)),
            stop=_stops(call["stop"]),
            sampling=params,
            n_probs=max(1, logprobs) if logprobs is not None else 0,
        )
        prefix = ""
        if call["echo"]:
            prefix = (
                prompt
                if isinstance(prompt, str)
                else self.detokenize(tokens).decode("utf-8", errors="replace")
            )
        meta = envelope("text_completion", call["model"] or self.model_path)
        return CallJob(
            task,
            CompletionShaper(meta, len(tokens), prefix, len(prefix)),
            len(tokens),
            logprobs,
            prefix=prefix,
        )

    def _chat_job(self, call: Mapping[str, Any]) -> CallJob:
        """A bound ``chat_call`` as a task."""
        _no_hooks(call["logits_processor"], None)
        messages, files = call["messages"], []
        if media.has_media(messages):
            if self._projector is None:
                raise ValueError(
                    "images or audio in messages need a multimodal projector: a chat_handler "
                    "with clip_model_path (MTMDChatHandler), or pyllama-server --mmproj"
                )
            messages, files = media.take_media(messages, self._projector.marker)
        plan: ChatPlan = plan_chat(
            self._model, self._template, messages,
            functions=call["functions"], function_call=call["function_call"], tools=call["tools"],
            tool_choice=call["tool_choice"], response_format=call["response_format"],
            grammar=grammar_text(call["grammar"]),
        )  # fmt: skip
        prompt: Any = plan.tokens
        if files:
            assert self._projector is not None
            try:  # the projector decodes the files and tokenizes text and media together
                prompt = self._projector.tokenize(plan.prompt, files, True, True)
            except _core.MediaError as e:
                raise ValueError(str(e)) from e
        n = len(prompt)
        if n >= self._n_ctx:
            raise ValueError(f"Requested tokens ({n}) exceed context window of {self._n_ctx}")
        grammar = plan.grammar
        chat_grammar = grammar if isinstance(grammar, ChatGrammar) else None
        text = chat_grammar.text if chat_grammar is not None else grammar
        params = self._sampling(sampler_args(call), call["seed"], text, call["logit_bias"])
        if chat_grammar is not None and chat_grammar.lazy:
            params.grammar_lazy = True
            params.grammar_trigger_patterns = list(chat_grammar.trigger_patterns)
            params.grammar_trigger_tokens = list(chat_grammar.trigger_tokens)
        elif chat_grammar is not None:
            params.grammar_prefill = list(chat_grammar.prefill)
        n_top = (call["top_logprobs"] or 0) if call["logprobs"] else None
        task = make_task(
            plan.tokens,
            n_predict=self._n_predict(call["max_tokens"], n),
            stop=[*_stops(call["stop"]), *plan.stops],
            sampling=params,
            n_probs=max(1, n_top) if n_top is not None else 0,
            preserved_tokens=list(plan.preserved),
        )
        if files:
            task.set_prompt(prompt)
        meta = envelope("chat.completion", call["model"] or self.model_path)
        return CallJob(
            task, ChatShaper(meta, plan, bool(call["logprobs"])), n, n_top, plan.preserved
        )

    def _embedding_tasks(
        self, texts: list[str], normalize: bool, truncate: bool
    ) -> tuple[list[_core.TaskParams], int]:
        if not self._embedding:
            raise RuntimeError(
                "Llama model must be created with embedding=True to call this method"
            )
        tasks, total = [], 0
        limit = min(self.n_batch, self._n_ctx)
        for text in texts:
            toks = self._model.tokenize(text, True, False)
            if truncate:
                toks = toks[:limit]
            if len(toks) > limit:
                raise ValueError(f"Requested tokens ({len(toks)}) exceed batch size of {limit}")
            t = _core.TaskParams()
            t.kind = _core.TaskKind.EMBEDDING
            t.prompt = toks or [self._model.token_bos]
            t.embd_normalize = 2 if normalize else -1
            tasks.append(t)
            total += len(t.prompt)
        return tasks, total

    def _vector(self, final: _core.Event) -> Any:
        flat = list(final.embedding)
        rows = final.n_embd_rows
        if rows > 1:
            width = len(flat) // rows
            return [flat[i * width : (i + 1) * width] for i in range(rows)]
        return flat

    # ---------------------------------------------------------------- events
    def _token_piece(self, ev: _core.Event, job: CallJob) -> dict[str, Any]:
        lp = None
        if job.n_top is not None and ev.token >= 0:
            text = self._piece(ev.token)
            top = [(self._piece(t), t, lp_) for t, lp_ in ev.top[: job.n_top]]
            lp = {"token": text, "logprob": ev.logprob, "top": top}
        return {
            "text": ev.text.decode("utf-8", errors="replace"),
            "token": ev.token,
            "logprobs": lp,
        }

    def _piece(self, token: int) -> str:
        return self._model.token_to_piece(token, False).decode("utf-8", errors="replace")

    @staticmethod
    def _final_piece(ev: _core.Event) -> dict[str, Any]:
        reason = "stop" if ev.stop in ("eos", "word") else "length"
        return {"finish_reason": reason, "completion_tokens": ev.n_predicted}

    def close(self) -> None:
        self.engine.stop()


def _stops(stop: Any) -> list[str]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if not all(isinstance(s, str) for s in stops):
        raise ValueError("stop must be a string or a list of strings")
    return stops
