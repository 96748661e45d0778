"""What a running server holds: the model, the engine, the chat template, counters.

The model loads on a worker thread after the HTTP socket is up, so /health can answer
503 "Loading model" meanwhile, as llama-server does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyllama import _core
from pyllama.chat import ChatTemplate
from pyllama.engine import AsyncEngine, default_threads
from pyllama.ftype import ftype_name
from pyllama.llama.options import POOLING_TYPES as POOLING
from pyllama.model_file import check_model_file, load_failure, quiet_load
from pyllama.server import speculative as spec
from pyllama.server.http.errors import APIError
from pyllama.server.load_params import (
    FLASH_ATTN,
    apply_fit,
    engine_options,
    model_options,
    ngram_spec,
    process_options,
)
from pyllama.server.media.content import MediaRules, media_marker
from pyllama.server.media.projector import load_projector
from pyllama.server.media.video import VideoOptions, find_tools
from pyllama.server.model_source import draft_path, model_path, source_name
from pyllama.server.ops.latency import RequestTimings
from pyllama.server.ops.metrics import MetricsBook
from pyllama.server.settings import Settings

if TYPE_CHECKING:
    from pyllama.server.batch import Batches

__all__ = ["ServerState"]

log = logging.getLogger("pyllama.server")
# -np's auto value for an encoder (BERT and its kin): it keeps no KV cache, so a slot costs
# nothing, and a decode holds as many inputs as there are slots (up to a ubatch); with
# llama-server's 4 a decode of short texts fills a sixth of a 512-token ubatch
ENCODER_SLOTS = 32


class ServerState:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model: _core.Model | None = None
        self.projector: _core.Projector | None = None  # --mmproj
        self.media_marker = media_marker()
        self.modalities = {"vision": False, "audio": False, "video": False}
        self.speculative = False  # a draft model or n-gram drafters serve the slots
        self.eog_tokens: list[int] = []
        self.engine: AsyncEngine | None = None
        self.chat: ChatTemplate | None = None  # llama.cpp's chat layer
        self.batches: Batches | None = None  # /v1/files and /v1/batches (app.py's lifespan)
        self.model_path = ""
        self.model_name = ""  # llama-server's: the first --alias, else the model's source
        self.model_aliases: list[str] = []  # /v1/models "aliases"
        self.n_ctx = 0
        self.n_ctx_slot = 0
        self.n_parallel = 0
        self.load_error: str | None = None
        self.load_exit_status = 1  # pyllama-server's, when the load fails: 2 for a bad flag
        # called on the event loop with load_error's text when the model cannot be loaded;
        # ``serve`` sets it to end the process (else every request answers 500 with it)
        self.on_load_error: Callable[[str], None] | None = None
        self.on_loaded: Callable[[], None] | None = None  # on the event loop, after a load
        self.started = int(time.time())
        self.info: dict[str, Any] = {}  # model facts, kept while asleep
        self.offload: tuple[int, int] = (0, 0)  # layers on GPU/RPC devices, of how many
        self.bos_text = self.eos_text = ""
        self.serves_completions = True  # False: a pooled embedding model (no KV cache)
        self.sleeping = False  # model and engine freed after --sleep-idle-seconds idle
        self.metrics_book = MetricsBook()
        # /metrics's request histograms: here, not in the engine, so they survive a sleep
        self.request_timings = RequestTimings()
        self._wake_lock = asyncio.Lock()
        self._lora_scales: list[float] | None = None  # set by /lora-adapters, kept across sleep
        self._engine_core: _core.Engine | None = None  # set on the loader thread
        self._loader: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.in_flight = 0  # requests that use the model (see sleep.WakeMiddleware)
        self.last_active = time.monotonic()

    # ----------------------------------------------------------------- lifecycle
    @property
    def ready(self) -> bool:
        return self.engine is not None

    def start(self) -> None:
        """Begin loading on a worker thread; the event loop stays free for /health."""
        self._loader = asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        try:
            await asyncio.to_thread(self._load_sync)
            assert self._engine_core is not None
            self.engine = self._front(self._engine_core)
            if self.settings.sleep_idle_seconds >= 0:
                self._watcher = asyncio.get_running_loop().create_task(self._watch_idle())
            if self.on_loaded is not None:
                self.on_loaded()
        except Exception as e:  # reported by /health and every endpoint
            self.load_error = load_failure(self.model_path or None, e)
            self.load_exit_status = getattr(e, "exit_status", 1)
            if self.on_load_error is not None:
                self.on_load_error(self.load_error)
            else:
                log.error("%s", self.load_error)

    def _front(self, core: _core.Engine) -> AsyncEngine:
        observer = self.request_timings if self.settings.metrics else None
        return AsyncEngine(core, observer=observer)

    def _load_sync(self) -> None:
        with quiet_load(self.settings.verbose):  # a failure becomes load_error's one line
            self._load_model()

    def _load_model(self) -> None:
        s = self.settings
        path = model_path(s)
        self.model_path = path  # names the file in load_error
        draft_file = draft_path(s)
        for file in (path, draft_file):
            if file is not None:
                check_model_file(file)
        auto = s.n_parallel < 0
        n_parallel = 4 if auto else s.n_parallel
        unified = auto if s.kv_unified is None else s.kv_unified
        process_options(s)
        n_ctx = s.n_ctx
        if not n_ctx and s.kv_unified_per_slot:  # the pool holds every slot's limit
            n_ctx = n_parallel * s.kv_unified_per_slot
        embedding = s.embeddings or s.reranking  # the engine unifies the KV cache then
        if embedding and s.n_batch > s.n_ubatch:
            # llama-server's warnings: the engine keeps a batch within one ubatch
            log.warning(
                "embeddings enabled with n_batch (%d) > n_ubatch (%d)", s.n_batch, s.n_ubatch
            )
            log.warning("setting n_batch = n_ubatch = %d to avoid assertion failure", s.n_ubatch)
        drafting = draft_file is not None and spec.uses_draft_model(s.spec_types)
        ngram = ngram_spec(s)
        placement, n_ctx = apply_fit(
            s,
            path,
            model_options(s),
            n_ctx,
            n_parallel,
            unified or embedding,
            speculative=drafting or ngram is not None,
        )
        model = _core.Model(path, **placement)
        if auto and embedding and model.is_encoder:
            n_parallel = ENCODER_SLOTS
        n_ctx = n_ctx or model.n_ctx_train
        threads = s.n_threads if s.n_threads > 0 else default_threads()
        draft = _core.Model(draft_file, **model_options(s, draft=True)) if drafting else None
        pooling = POOLING[s.pooling] if s.pooling else (4 if s.reranking else -1)
        projector = self._load_projector(model, threads, path)
        core = _core.Engine(
            model,
            projector=projector,
            n_parallel=n_parallel,
            n_ctx=n_ctx,
            n_batch=s.n_batch,
            n_ubatch=min(s.n_ubatch, s.n_batch),
            n_threads=threads,
            n_threads_batch=s.n_threads_batch if s.n_threads_batch > 0 else threads,
            flash_attn=FLASH_ATTN[s.flash_attn],
            embeddings=s.embeddings or s.reranking,
            pooling=pooling,
            type_k=s.cache_type_k,
            type_v=s.cache_type_v,
            kv_unified=unified,
            max_queue=s.max_queue,
            # llama-server: 0.0 turns the similarity choice off (least recently used slot);
            # the engine picks a slot whose similarity is above the bound, never above 1.0
            slot_prompt_similarity=s.slot_prompt_similarity or 1.0,
            context_shift=s.context_shift,
            n_keep=s.n_keep,
            lora=s.lora,
            draft_model=draft,
            spec_n_max=s.spec_draft_n_max,
            spec_n_min=s.spec_draft_n_min,
            spec_p_min=s.spec_draft_p_min,
            spec_synth_probs=s.spec_synth_probs,
            ngram=ngram,
            cache_ram_mib=s.cache_ram_mib,
            cache_idle_slots=s.cache_idle_slots,
            share_prefix=s.prefix_share,
            share_min=s.prefix_share_min,
            embd_step_tokens=s.embd_step_tokens,  # -1: the engine's n_embd/2 for an encoder
            verbose=s.verbose,
            **engine_options(s),
        )
        if core.warmup_ms >= 0:
            log.info("warmed up the model with an empty run in %.0f ms", core.warmup_ms)
        # llama.cpp's chat layer, as llama-server sets it up: the template (the model's,
        # --chat-template's text or built-in name, else chatml) and the flags it reads
        if self.chat is not None:  # woken from sleep: the last one's render workers go
            self.chat.close()
        self.chat = ChatTemplate(
            s.chat_template or "",
            model=model,
            use_jinja=s.jinja,
            prefill_assistant=s.prefill_assistant,
            reasoning_format=s.reasoning_format,
            kwargs=s.chat_template_kwargs,
            allow_image=bool(projector and projector.vision),
            allow_audio=bool(projector and projector.audio),
            reasoning=s.reasoning,
            reasoning_budget=s.reasoning_budget,
            reasoning_budget_message=s.reasoning_budget_message,
            force_pure_content=s.skip_chat_parsing,
            bounded_model_path=path,  # untrusted templates: renders bounded (RELIABILITY 19)
        )
        if self._lora_scales is not None:
            core.set_lora_scales(self._lora_scales)
        self.model = model
        self.projector = projector
        self.speculative = drafting or ngram is not None
        # llama-server's /props "modalities"; kept while asleep. Video: vision, and ffmpeg
        # and ffprobe found (llama-server reports vision alone, then fails at the request)
        vision = bool(projector and projector.vision)
        self.modalities = {
            "vision": vision,
            "audio": bool(projector and projector.audio),
            "video": vision and find_tools(self.settings.video_ffmpeg_dir) is not None,
        }
        self.info = {
            "n_vocab": model.n_vocab,
            "n_ctx_train": model.n_ctx_train,
            "n_embd": model.n_embd,
            "n_params": model.n_params,
            "size": model.size,
            "ftype": ftype_name(model),  # /props model_ftype
        }
        # llama.cpp's count (layers and output) of what went to GPU/RPC devices
        self.offload = (model.offloaded_layers, model.offloadable_layers)
        # what ignore_eos bans, for generation_settings (a vocabulary scan: ~15 ms at 50k)
        self.eog_tokens = [t for t in range(model.n_vocab) if model.is_eog(t)]
        self.bos_text = self._special(model, model.token_bos)
        self.eos_text = self._special(model, model.token_eos)
        # llama-server names a model without --alias by where it came from, and lists that
        # name as its one alias (server.cpp, common_params_model::get_name)
        self.model_aliases = s.alias or [source_name(s, path)]
        self.model_name = self.model_aliases[0]
        self.n_ctx = n_ctx
        self.n_parallel = n_parallel
        self.n_ctx_slot = core.n_ctx_slot
        self.serves_completions = core.serves_completions
        self._engine_core = core

    def _load_projector(
        self, model: _core.Model, threads: int, model_file: str
    ) -> _core.Projector | None:
        """--mmproj (or --mmproj-url, downloaded once into the cache, or the one that came
        with an -hf model) for this model."""
        s = self.settings
        path = s.mmproj
        if s.mmproj_url:  # into --mmproj's path when given, as llama.cpp
            from pyllama.server.media.download import fetch_projector

            path = fetch_projector(s.mmproj_url, offline=s.offline, path=path)
        if path is None and s.mmproj_auto and s.model is None and s.hf_repo:
            from pyllama import hub

            found = hub.projector_beside(Path(model_file))
            if found is None:
                return None
            path = str(found)
            if s.model_draft is not None or s.draft_hf_repo:
                raise ValueError("--mmproj cannot be used with a draft model (--model-draft) yet")
            log.info("loading the projector that came with %s: %s", s.hf_repo, path)
            # found only now: what the command line check does for --mmproj (llama-server's
            # warnings), before the engine and requests read these
            for on, what in ((s.context_shift, "ctx_shift"), (s.cache_reuse, "cache_reuse")):
                if on:
                    log.warning("%s is not supported by multimodal, it will be disabled", what)
            s.context_shift, s.cache_reuse = False, 0
        if path is None:
            return None
        flag = "--mmproj" if s.mmproj else "--mmproj-url" if s.mmproj_url else "--hf-repo"
        device = s.mmproj_device or (s.devices[0] if s.devices else "")
        return load_projector(
            model,
            path,
            flag,
            use_gpu=s.mmproj_offload and device != "none",
            device="" if device == "none" else device,
            n_threads=threads,
            image_min_tokens=s.image_min_tokens,
            image_max_tokens=s.image_max_tokens,
            batch_max_tokens=s.mtmd_batch_max_tokens,
            marker=self.media_marker,
        )

    def media_rules(self) -> MediaRules:
        """What media requests may hold: the projector's modalities, --media-path."""
        p = self.projector
        s = self.settings
        return MediaRules(
            image=bool(p and p.vision),
            audio=bool(p and p.audio),
            marker=self.media_marker,
            media_path=s.media_path,
            allow_private=s.media_allow_private,
            video=self._video_options() if p and p.vision else None,
        )

    def _video_options(self) -> VideoOptions:
        s = self.settings
        return VideoOptions(s.video_fps, s.video_timestamp_interval_ms, s.video_ffmpeg_dir)

    @staticmethod
    def _special(model: _core.Model, token: int) -> str:
        if token < 0:
            return ""
        return model.token_to_piece(token, special=True).decode("utf-8", errors="replace")

    async def sleep(self) -> None:
        """Free the model and the engine (their memory goes back); ``wake`` reloads them."""
        async with self._wake_lock:
            if self.engine is None or self.sleeping:
                return
            core = self.engine.engine
            self.metrics_book.retire(core.metrics())
            if core.lora_paths:
                self._lora_scales = list(core.lora_scales())
            self.engine.close()  # joins the loop thread; no task is running
            self.engine = None
            self.model = None
            self.projector = None
            self._engine_core = None
            self.sleeping = True

    async def wake(self) -> None:
        if not self.sleeping:
            return
        async with self._wake_lock:
            if not self.sleeping:
                return
            try:
                await asyncio.to_thread(self._load_sync)
            except Exception as e:  # every request then gets a 500 naming the cause
                self.load_error = load_failure(self.model_path or None, e)
                self.sleeping = False
                return
            assert self._engine_core is not None
            self.engine = self._front(self._engine_core)
            self.metrics_book.revive()
            self.sleeping = False
            self.last_active = time.monotonic()

    async def _watch_idle(self) -> None:
        # Sleep once no request has used the model for --sleep-idle-seconds and the engine
        # has nothing live (a streamed response counts as in flight until its last byte).
        limit = self.settings.sleep_idle_seconds
        while True:
            await asyncio.sleep(min(0.25, max(limit, 0.01) / 4))
            if self.sleeping or self.engine is None:
                continue
            m = self.engine.engine.metrics()
            if self.in_flight or m["n_processing"] or m["n_deferred"]:
                self.last_active = time.monotonic()
            elif time.monotonic() - self.last_active >= limit:
                await self.sleep()

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        if self._loader is not None and not self._loader.done():
            self._loader.cancel()
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        if self.chat is not None:
            self.chat.close()

    # ------------------------------------------------------------------- access
    def require(self) -> tuple[_core.Model, AsyncEngine]:
        """The model and engine, or 503 while loading (500 if loading failed)."""
        if self.load_error:
            raise APIError(500, self.load_error)
        if self.engine is None or self.model is None:
            raise APIError(503, "Loading model")
        return self.model, self.engine

    def check(self) -> None:
        """For routes that answer from what is kept while asleep: fails only while
        loading (503) or if loading failed (500)."""
        if self.sleeping:
            return
        self.require()

    def model_info(self) -> dict[str, Any]:
        return self.info
