"""llama-server's options for the draft model and the other speculative decoders: the
draft model's placement (``-devd``, ``-ngld``, ``-otd``, ``--cpu-moe-draft`` ...) and KV
types (``-ctkd``/``-ctvd``), the n-gram drafters' sizes and lookup caches, and the
options llama.cpp removed (an error naming their replacement, as llama-server). Standard
library only."""

from __future__ import annotations

import argparse
import os

from pyllama.server.flags.model import tensor_overrides
from pyllama.server.flags.table import FlagTable, env_bool
from pyllama.server.settings import NgramOptions

__all__ = ["add_speculative_flags", "draft_options", "ngram_options"]

# (spelling, default, lowest, highest, llama.cpp's message when out of range)
_SIZE_N = "ngram size N must be between 1 and 1024 inclusive"
_SIZE_M = "ngram size M must be between 1 and 1024 inclusive"
_HITS = "ngram min hits must be at least 1"
_NGRAM = [
    ("--spec-ngram-mod-n-min", 48, 0, 1024, "ngram n-min must be between 0 and 1024 inclusive"),
    ("--spec-ngram-mod-n-max", 64, 0, 1024, "ngram n-max must be between 0 and 1024 inclusive"),
    ("--spec-ngram-mod-n-match", 24, 1, 1024, _SIZE_N),
    ("--spec-ngram-simple-size-n", 12, 1, 1024, _SIZE_N),
    ("--spec-ngram-simple-size-m", 48, 1, 1024, _SIZE_M),
    ("--spec-ngram-simple-min-hits", 1, 1, 65535, _HITS),
    ("--spec-ngram-map-k-size-n", 12, 1, 1024, _SIZE_N),
    ("--spec-ngram-map-k-size-m", 48, 1, 1024, _SIZE_M),
    ("--spec-ngram-map-k-min-hits", 1, 1, 65535, _HITS),
    ("--spec-ngram-map-k4v-size-n", 12, 1, 1024, _SIZE_N),
    ("--spec-ngram-map-k4v-size-m", 48, 1, 1024, _SIZE_M),
    ("--spec-ngram-map-k4v-min-hits", 1, 1, 65535, _HITS),
]


def add_speculative_flags(t: FlagTable) -> None:
    flag = t.flag
    t.section("common")
    for kv in ("k", "v"):
        flag(
            f"--spec-draft-type-{kv}",
            f"-ct{kv}d",
            f"--cache-type-{kv}-draft",
            dest=f"draft_cache_type_{kv}",
            default="",
            metavar="TYPE",
            env=f"LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_{kv.upper()}",
            help=f"KV cache type for {kv.upper()} of the draft model (default: f16)",
        )
    t.section("speculative")
    flag(
        "--spec-draft-device",
        "-devd",
        "--device-draft",
        dest="draft_device",
        metavar="<dev1,dev2,..>",
        help="devices for the draft model (default: --device)",
    )
    flag(
        "--spec-draft-ngl",
        "-ngld",
        "--gpu-layers-draft",
        "--n-gpu-layers-draft",
        dest="draft_gpu_layers",
        default="auto",
        env="LLAMA_ARG_N_GPU_LAYERS_DRAFT",
        metavar="N",
        help="draft model layers in VRAM: a number, 'auto' or 'all' (default: auto)",
    )
    flag(
        "--spec-draft-override-tensor",
        "-otd",
        "--override-tensor-draft",
        dest="draft_override_tensor",
        action="append",
        default=[],
        metavar="PATTERN=TYPE,...",
        help="buffer type overrides for the draft model's tensors",
    )
    flag(
        "--spec-draft-cpu-moe",
        "-cmoed",
        "--cpu-moe-draft",
        dest="draft_cpu_moe",
        action="store_true",
        env="LLAMA_ARG_SPEC_DRAFT_CPU_MOE",
        conv=env_bool,
        help="keep all of the draft model's MoE weights on the CPU",
    )
    flag(
        "--spec-draft-n-cpu-moe",
        "--spec-draft-ncmoe",
        "-ncmoed",
        "--n-cpu-moe-draft",
        dest="draft_n_cpu_moe",
        type=int,
        env="LLAMA_ARG_SPEC_DRAFT_N_CPU_MOE",
        metavar="N",
        help="keep the draft model's MoE weights of the first N layers on the CPU",
    )
    flag(
        "--spec-draft-p-split",
        "--draft-p-split",
        dest="draft_p_split",
        type=float,
        default=0.1,
        env="LLAMA_ARG_SPEC_DRAFT_P_SPLIT",
        metavar="P",
        help="speculative decoding split probability (llama-server takes it unused)",
    )
    t.switch(
        ["--spec-draft-backend-sampling"],
        ["--no-spec-draft-backend-sampling"],
        "draft_backend_sampling",
        "LLAMA_ARG_SPEC_DRAFT_BACKEND_SAMPLING",
        "the draft model's top-10 pick inside its graph (default: on)",
    )
    for name, default, *_ in _NGRAM:
        flag(
            name,
            type=int,
            default=default,
            metavar="N",
            help=f"n-gram speculative decoding (--spec-type ngram-*): default {default}",
        )
    t.removed(
        "--draft",
        "--draft-n",
        "--draft-max",
        env="LLAMA_ARG_DRAFT_MAX",
        use="--spec-draft-n-max or --spec-ngram-mod-n-max",
    )
    t.removed(
        "--draft-min",
        "--draft-n-min",
        env="LLAMA_ARG_DRAFT_MIN",
        use="--spec-draft-n-min or --spec-ngram-mod-n-min",
    )
    t.removed(
        "--spec-ngram-size-n",
        use="the respective --spec-ngram-*-size-n or --spec-ngram-mod-n-match",
    )
    t.removed("--spec-ngram-size-m", use="the respective --spec-ngram-*-size-m")
    t.removed("--spec-ngram-min-hits", use="the respective --spec-ngram-*-min-hits")
    t.section("server")
    flag(
        "-lcs",
        "--lookup-cache-static",
        metavar="FNAME",
        help="static lookup cache for --spec-type ngram-cache (llama-lookup-create's file)",
    )
    flag(
        "-lcd",
        "--lookup-cache-dynamic",
        metavar="FNAME",
        help="dynamic lookup cache for --spec-type ngram-cache (read, never written)",
    )


def draft_options(a: argparse.Namespace) -> dict[str, object]:
    """The draft model's fields of ContextOptions and its tensor overrides; ValueError names a
    bad option."""
    if not 0.0 <= a.draft_p_split <= 1.0:
        raise ValueError("--spec-draft-p-split must be in [0, 1]")
    ngl = a.draft_gpu_layers
    if ngl not in ("auto", "all"):
        try:
            int(ngl)
        except ValueError:
            raise ValueError(
                f"--spec-draft-ngl must be a number, 'auto' or 'all', got '{ngl}'"
            ) from None
    devices = [d.strip() for d in (a.draft_device or "").split(",") if d.strip()]
    if a.draft_device is not None and not devices:
        raise ValueError("--spec-draft-device: no devices specified")
    return {
        "draft_threads": a.draft_threads,
        "draft_threads_batch": a.draft_threads_batch,
        "draft_cache_type_k": a.draft_cache_type_k,
        "draft_cache_type_v": a.draft_cache_type_v,
        "draft_devices": devices,
        "draft_gpu_layers": ngl,
        "draft_tensor_overrides": tensor_overrides(
            a.draft_override_tensor,
            a.draft_cpu_moe,
            a.draft_n_cpu_moe,
            flag="--spec-draft-override-tensor",
        ),
    }


def ngram_options(a: argparse.Namespace) -> NgramOptions:
    """The n-gram drafters' options, checked with llama-server's messages; ValueError."""
    v: dict[str, int] = {}
    for name, _, lo, hi, message in _NGRAM:
        value = getattr(a, name[2:].replace("-", "_"))
        if not lo <= value <= hi:
            raise ValueError(f"{name}: {message}")
        v[name[len("--spec-ngram-") :]] = value
    for name, path in (
        ("--lookup-cache-static", a.lookup_cache_static),
        ("--lookup-cache-dynamic", a.lookup_cache_dynamic),
    ):
        if path and not os.path.isfile(path):
            raise ValueError(f"{name}: '{path}' does not exist or is not a file")

    def sizes(kind: str) -> tuple[int, int, int]:
        return (v[f"{kind}-size-n"], v[f"{kind}-size-m"], v[f"{kind}-min-hits"])

    return NgramOptions(
        mod_n_match=v["mod-n-match"],
        mod_n_min=v["mod-n-min"],
        mod_n_max=v["mod-n-max"],
        simple=sizes("simple"),
        map_k=sizes("map-k"),
        map_k4v=sizes("map-k4v"),
        lookup_cache_static=a.lookup_cache_static or "",
        lookup_cache_dynamic=a.lookup_cache_dynamic or "",
    )
