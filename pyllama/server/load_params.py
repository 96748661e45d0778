"""The settings' model and context options as ``_core`` arguments: the placement and load
options of ``_core.Model`` (main and draft), the context options of ``_core.Engine``,
``--fit`` applied before loading, and the process-wide ``--numa``/``--prio``."""

from __future__ import annotations

import logging
import threading
from typing import Any

from pyllama import _core
from pyllama.server.settings import CpuPlacement, Settings
from pyllama.server.speculative import NGRAM_TYPES

__all__ = ["apply_fit", "engine_options", "model_options", "ngram_spec", "process_options"]

log = logging.getLogger("pyllama.server")
ROPE_SCALING = {None: -1, "none": 0, "linear": 1, "yarn": 2}
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}
_numa_lock = threading.Lock()
_numa_done = False


def _ngl(value: str) -> int:
    return -1 if value in ("auto", "all") else int(value)


def _cpu(p: CpuPlacement | None) -> _core.CpuParams | None:
    if p is None:
        return None
    return _core.CpuParams(
        mask=p.mask, range=p.range, strict=p.strict, priority=p.priority, poll=p.poll
    )


def model_options(s: Settings, draft: bool = False) -> dict[str, Any]:
    """``_core.Model`` keyword arguments for the model (or the draft model)."""
    c, load = s.context, s.load
    devices = (c.draft_devices or s.devices) if draft else s.devices
    return dict(
        n_gpu_layers=_ngl(c.draft_gpu_layers if draft else s.n_gpu_layers),
        devices=devices,
        split_mode=s.split_mode,
        main_gpu=s.main_gpu,
        tensor_split=s.tensor_split,
        kv_overrides=[] if draft else load.kv_overrides,
        tensor_overrides=load.draft_tensor_overrides if draft else load.tensor_overrides,
        repack=load.repack,
        no_host=load.no_host,
        load_mode=load.load_mode,
        lazy_mode=load.lazy_mode,
        check_tensors=load.check_tensors,
    )


def engine_options(s: Settings) -> dict[str, Any]:
    """``_core.Engine`` keyword arguments for the context options (RoPE ... warm-up)."""
    c = s.context
    return dict(
        offload_kqv=c.kv_offload,
        op_offload=c.op_offload,
        rope_scaling_type=ROPE_SCALING[c.rope_scaling],
        rope_freq_base=c.rope_freq_base,
        rope_freq_scale=c.rope_freq_scale,
        yarn_ext_factor=c.yarn_ext_factor,
        yarn_attn_factor=c.yarn_attn_factor,
        yarn_beta_fast=c.yarn_beta_fast,
        yarn_beta_slow=c.yarn_beta_slow,
        yarn_orig_ctx=c.yarn_orig_ctx,
        cpu=_cpu(c.cpu),
        cpu_batch=_cpu(c.cpu_batch),
        control_vectors=c.control_vectors,
        control_vector_layers=c.control_vector_layers,
        warmup=c.warmup,
        perf=c.perf,
        draft_threads=c.draft_threads,
        draft_threads_batch=c.draft_threads_batch,
        draft_cpu=_cpu(c.draft_cpu),
        draft_cpu_batch=_cpu(c.draft_cpu_batch),
        draft_type_k=c.draft_cache_type_k,
        draft_type_v=c.draft_cache_type_v,
        n_ctx_slot_max=s.kv_unified_per_slot or 0,
        cont_batching=s.cont_batching,
        n_ctx_checkpoints=s.context.ctx_checkpoints,
        swa_full=s.context.swa_full,
        checkpoint_min_step=s.context.checkpoint_min_step,
        graph_greedy=not s.host_greedy,
        draft_backend_sampling=s.draft_backend_sampling,
    )


def ngram_spec(s: Settings) -> _core.NgramSpec | None:
    """The n-gram drafters for ``_core.Engine`` (--spec-type ngram-*), or None."""
    types = [t for t in s.spec_types if t in NGRAM_TYPES]
    if not types:
        return None
    o = s.ngram
    spec = _core.NgramSpec()
    spec.types = types
    spec.mod_n_match, spec.mod_n_min, spec.mod_n_max = o.mod_n_match, o.mod_n_min, o.mod_n_max
    for name, sizes in (("simple", o.simple), ("map_k", o.map_k), ("map_k4v", o.map_k4v)):
        m = _core.NgramMap()
        m.size_n, m.size_m, m.min_hits = sizes
        setattr(spec, name, m)
    spec.lookup_cache_static = o.lookup_cache_static
    spec.lookup_cache_dynamic = o.lookup_cache_dynamic
    return spec


def process_options(s: Settings) -> None:
    """--numa (once per process, before the first model) and --prio (llama-server sets
    the process priority after creating its context; before the load is as good)."""
    global _numa_done
    if s.load.numa:
        with _numa_lock:
            if not _numa_done:
                _core.numa_init(s.load.numa)
                _numa_done = True
    prio = s.context.cpu.priority
    if prio != 0 and not _core.set_process_priority(prio):
        log.warning("cannot set the process priority to %d (--prio)", prio)


def apply_fit(
    s: Settings,
    path: str,
    model: dict[str, Any],
    n_ctx: int,
    n_parallel: int,
    unified: bool,
    speculative: bool,
) -> tuple[dict[str, Any], int]:
    """--fit: llama.cpp lowers what was left at its default (-ngl auto, -c 0, no tensor
    split or overrides) until the model fits the devices' free memory. Returns the model
    arguments and the context size to use."""
    if not s.load.fit:
        return model, n_ctx
    keys = ("n_gpu_layers", "devices", "split_mode", "main_gpu", "tensor_split")
    keys += ("repack", "no_host", "load_mode", "lazy_mode")
    r = _core.fit_params(
        path,
        **{k: model[k] for k in keys},
        tensor_overrides=model["tensor_overrides"],
        kv_overrides=model["kv_overrides"],
        n_ctx=n_ctx,
        n_parallel=n_parallel,
        n_batch=s.n_batch,
        n_ubatch=min(s.n_ubatch, s.n_batch),
        flash_attn=FLASH_ATTN[s.flash_attn],
        type_k=s.cache_type_k,
        type_v=s.cache_type_v,
        kv_unified=unified,
        offload_kqv=s.context.kv_offload,
        op_offload=s.context.op_offload,
        swa_full=s.context.swa_full,
        margins_mib=s.load.fit_target_mib,
        n_ctx_min=s.load.fit_ctx,
        embeddings=bool(s.embeddings or s.reranking),
        speculative=speculative,
    )
    if r["status"] == 1:
        log.info("--fit: no allocation is projected to fit the devices' free memory")
    elif r["status"] == 2:  # an unreadable file: the load itself says why
        return model, n_ctx
    fitted = dict(model, n_gpu_layers=r["n_gpu_layers"], tensor_overrides=r["tensor_overrides"])
    if r["tensor_split"]:
        fitted["tensor_split"] = r["tensor_split"]
    return fitted, r["n_ctx"]
