"""llama-server's model and context options: RoPE/YaRN, offload and repacking, load and
lazy modes, NUMA, metadata and tensor overrides (``--cpu-moe`` ...), ``--fit``, control
vectors and the warm-up. They become ``LoadOptions`` (how the file loads) and
``ContextOptions`` (the llama_context). Standard library only."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from pyllama.server.flags.table import FlagTable, env_bool
from pyllama.server.settings import ContextOptions, LoadOptions

__all__ = ["add_model_flags", "model_options", "tensor_overrides"]

# llama.cpp's patterns (common.h): MoE expert weights, dense FFN weights
FFN_EXPS = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE = r"\.ffn_(up|down|gate)\."
ROPE_SCALING = ("none", "linear", "yarn")
LOAD_MODES = ("auto", "none", "mmap", "mlock", "mmap+mlock", "dio")
NUMA = ("distribute", "isolate", "numactl")


def add_model_flags(t: FlagTable) -> None:
    flag, switch = t.flag, t.switch
    t.section("common")
    flag(
        "--swa-full",
        action="store_true",
        env="LLAMA_ARG_SWA_FULL",
        conv=env_bool,
        help="full-size SWA cache: more memory, a cached prompt reused past the window without "
        "checkpoints (default: window-sized, as llama-server)",
    )
    switch(
        ["--perf"],
        ["--no-perf"],
        "perf",
        "LLAMA_ARG_PERF",
        "llama.cpp's internal performance timings (default: off)",
    )
    flag(
        "--rope-scaling",
        choices=ROPE_SCALING,
        env="LLAMA_ARG_ROPE_SCALING_TYPE",
        help="RoPE frequency scaling method (default: the model's, else linear)",
    )
    flag(
        "--rope-scale",
        type=float,
        env="LLAMA_ARG_ROPE_SCALE",
        metavar="N",
        help="RoPE context scaling factor: expands the context by N",
    )
    for name, what in (
        ("--rope-freq-base", "RoPE base frequency (NTK-aware scaling; default: the model's)"),
        ("--rope-freq-scale", "RoPE frequency scaling factor: expands the context by 1/N"),
        ("--yarn-ext-factor", "YaRN extrapolation mix factor (0.0: full interpolation)"),
        ("--yarn-attn-factor", "YaRN: scale sqrt(t) or attention magnitude"),
        ("--yarn-beta-slow", "YaRN: high correction dim or alpha"),
        ("--yarn-beta-fast", "YaRN: low correction dim or beta"),
    ):
        env = "LLAMA_ARG_" + name[2:].upper().replace("-", "_")
        flag(name, type=float, env=env, metavar="N", help=what)
    flag(
        "--yarn-orig-ctx",
        type=int,
        env="LLAMA_ARG_YARN_ORIG_CTX",
        metavar="N",
        help="YaRN: the model's original context (default: its training context)",
    )
    switch(
        ["-kvo", "--kv-offload"],
        ["-nkvo", "--no-kv-offload"],
        "kv_offload",
        "LLAMA_ARG_KV_OFFLOAD",
        "KV cache offloading to the GPU (default: on)",
    )
    switch(
        ["--repack"],
        ["-nr", "--no-repack"],
        "repack",
        "LLAMA_ARG_REPACK",
        "weight repacking for the CPU's kernels (default: on)",
    )
    flag(
        "--no-host",
        action="store_true",
        env="LLAMA_ARG_NO_HOST",
        conv=env_bool,
        help="bypass the host buffer, so that extra buffer types can be used",
    )
    flag(
        "-dt",
        "--defrag-thold",
        env="LLAMA_ARG_DEFRAG_THOLD",
        metavar="N",
        help="deprecated, no longer needed (a warning, as llama-server)",
    )
    flag(
        "-lm",
        "--load-mode",
        choices=LOAD_MODES,
        default="auto",
        env="LLAMA_ARG_LOAD_MODE",
        help="how the model file loads (default: auto: mmap unless a device cannot)",
    )
    flag(
        "-lzm",
        "--lazy-mode",
        choices=("on", "auto", "off"),
        default="auto",
        env="LLAMA_ARG_LAZY_MODE",
        help="read marked tensors on demand (default: auto: > 4 GiB)",
    )
    flag("--numa", choices=NUMA, env="LLAMA_ARG_NUMA", help="NUMA strategy (default: none)")
    flag(
        "-ot",
        "--override-tensor",
        action="append",
        default=[],
        env="LLAMA_ARG_OVERRIDE_TENSOR",
        conv=lambda v: [v],
        metavar="PATTERN=TYPE,...",
        help="buffer type for the tensors whose names match, e.g. exps=CPU",
    )
    flag(
        "-cmoe",
        "--cpu-moe",
        action="store_true",
        env="LLAMA_ARG_CPU_MOE",
        conv=env_bool,
        help="keep all Mixture of Experts weights on the CPU",
    )
    flag(
        "-ncmoe",
        "--n-cpu-moe",
        type=int,
        env="LLAMA_ARG_N_CPU_MOE",
        metavar="N",
        help="keep the MoE weights of the first N layers on the CPU",
    )
    flag(
        "-ncffn",
        "--n-cpu-ffn",
        type=int,
        env="LLAMA_ARG_N_CPU_FFN",
        metavar="N",
        help="keep the dense FFN weights of the first N layers on the CPU",
    )
    flag(
        "-fit",
        "--fit",
        default="on",
        env="LLAMA_ARG_FIT",
        metavar="on|off",
        help="lower -ngl and -c (when not given) to fit device memory (default: on)",
    )
    flag(
        "-fitt",
        "--fit-target",
        env="LLAMA_ARG_FIT_TARGET",
        metavar="MiB0,MiB1,...",
        help="memory --fit leaves free per device (default: 1024)",
    )
    flag(
        "-fitc",
        "--fit-ctx",
        type=int,
        default=4096,
        env="LLAMA_ARG_FIT_CTX",
        metavar="N",
        help="the smallest context --fit may choose (default: 4096)",
    )
    flag("--check-tensors", action="store_true", help="check the weights for invalid values")
    flag(
        "--override-kv",
        action="append",
        default=[],
        metavar="KEY=TYPE:VALUE,...",
        help="override model metadata (types: int, float, bool, str)",
    )
    switch(
        ["--op-offload"],
        ["--no-op-offload"],
        "op_offload",
        None,
        "offload host tensor operations to the device (default: on)",
    )
    flag(
        "--control-vector",
        action="append",
        default=[],
        metavar="FNAME",
        help="add a control vector (comma-separated for several)",
    )
    flag(
        "--control-vector-scaled",
        action="append",
        default=[],
        metavar="FNAME:SCALE,...",
        help="add a control vector scaled by SCALE",
    )
    flag(
        "--control-vector-layer-range",
        nargs=2,
        type=int,
        metavar=("START", "END"),
        help="the layers the control vectors apply to (inclusive)",
    )
    t.section("server")
    flag(
        "-ctxcp",
        "--ctx-checkpoints",
        "--swa-checkpoints",
        type=int,
        default=32,
        env="LLAMA_ARG_CTX_CHECKPOINTS",
        metavar="N",
        help="context checkpoints per slot: a recurrent, hybrid or sliding-window model's state "
        "before each prompt's end, to resume from (default: 32)",
    )
    flag(
        "-cms",
        "--checkpoint-min-step",
        type=int,
        default=8192,
        env="LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT",
        metavar="N",
        help="tokens between context checkpoints (see --ctx-checkpoints)",
    )
    switch(
        ["--warmup"],
        ["--no-warmup"],
        "warmup",
        None,
        "decode BOS and EOS once at start (default: on)",
    )


def _csv(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


# llama.cpp's LLAMA_MAX_LAYERS: a larger --n-cpu-moe means "every layer", and must not
# become billions of patterns
MAX_LAYERS = 512


def _layers_on_cpu(n: int, pattern: str) -> list[tuple[str, str]]:
    return [(rf"blk\.{i}{pattern}", "CPU") for i in range(min(n, MAX_LAYERS))]


def tensor_overrides(
    items: list[str],
    cpu_moe: bool,
    n_cpu_moe: int | None,
    n_cpu_ffn: int | None = None,
    flag: str = "--override-tensor",
) -> list[tuple[str, str]]:
    """-ot's PATTERN=TYPE items, then --cpu-moe and --n-cpu-moe/--n-cpu-ffn, in
    llama-server's order; ValueError names a bad item (and ``flag``, the items' option)."""
    out: list[tuple[str, str]] = []
    for item in _csv(items):
        pattern, eq, buft = item.partition("=")
        if not eq or not pattern or not buft:
            raise ValueError(f"{flag}: expected PATTERN=BUFFER_TYPE, got '{item}'")
        out.append((pattern, buft))
    if cpu_moe:
        out.append((FFN_EXPS, "CPU"))
    for n, pattern, name in ((n_cpu_moe, FFN_EXPS, "moe"), (n_cpu_ffn, FFN_DENSE, "ffn")):
        if n is not None:
            if n < 0:
                prefix = "--spec-draft-" if flag.startswith("--spec-draft") else "--"
                raise ValueError(f"{prefix}n-cpu-{name} must be >= 0")
            out += _layers_on_cpu(n, pattern)
    return out


def _kv_overrides(items: list[str]) -> list[str]:
    out = _csv(items)
    for item in out:
        key, eq, value = item.partition("=")
        kind, colon, _ = value.partition(":")
        if not eq or not key or not colon or kind not in ("int", "float", "bool", "str"):
            raise ValueError(f"--override-kv: invalid type for KV override: {item}")
    return out


def _control_vectors(a: argparse.Namespace) -> list[tuple[str, float]]:
    out = [(path, 1.0) for path in _csv(a.control_vector)]
    for item in _csv(a.control_vector_scaled):
        path, sep, scale = item.rpartition(":")
        if not sep or not path:
            raise ValueError("--control-vector-scaled format: FNAME:SCALE")
        try:
            out.append((path, float(scale)))
        except ValueError:
            raise ValueError(f"--control-vector-scaled: '{scale}' is not a number") from None
    return out


def _fit(a: argparse.Namespace) -> bool:
    try:
        return env_bool(a.fit)
    except argparse.ArgumentTypeError:
        raise ValueError(f"unknown value for --fit: '{a.fit}'") from None


def _fit_target(value: str | None) -> list[int]:
    if not value:
        return [1024]
    try:
        return [int(v) for v in value.replace("/", ",").split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--fit-target: MiB per device, comma-separated, got '{value}'") from None


def model_options(
    a: argparse.Namespace, warn: Callable[[str], None]
) -> tuple[LoadOptions, ContextOptions]:
    """What the flags ask of the model load and the context (CPU placement and the draft
    model's context are filled in by their own modules); ValueError names a bad option."""
    if a.defrag_thold is not None:
        warn("DEPRECATED: --defrag-thold is deprecated and no longer necessary to specify")
    if a.checkpoint_min_step < 0:
        raise ValueError("--checkpoint-min-step must be non-negative")
    if a.ctx_checkpoints < 0:
        raise ValueError("--ctx-checkpoints must be >= 0")
    load = LoadOptions(
        kv_overrides=_kv_overrides(a.override_kv),
        tensor_overrides=tensor_overrides(a.override_tensor, a.cpu_moe, a.n_cpu_moe, a.n_cpu_ffn),
        repack=a.repack is not False,
        no_host=bool(a.no_host),
        load_mode=a.load_mode,
        lazy_mode=a.lazy_mode,
        check_tensors=bool(a.check_tensors),
        numa=a.numa,
        fit=_fit(a),
        fit_target_mib=_fit_target(a.fit_target),
        fit_ctx=a.fit_ctx,
    )
    scale = a.rope_freq_scale
    if a.rope_scale is not None:
        if a.rope_scale == 0:
            raise ValueError("--rope-scale must not be 0")
        scale = 1.0 / a.rope_scale
    layers = tuple(a.control_vector_layer_range or (0, 0))
    context = ContextOptions(
        rope_scaling=a.rope_scaling,
        rope_freq_base=a.rope_freq_base or 0.0,
        rope_freq_scale=scale or 0.0,
        yarn_ext_factor=-1.0 if a.yarn_ext_factor is None else a.yarn_ext_factor,
        yarn_attn_factor=-1.0 if a.yarn_attn_factor is None else a.yarn_attn_factor,
        yarn_beta_fast=-1.0 if a.yarn_beta_fast is None else a.yarn_beta_fast,
        yarn_beta_slow=-1.0 if a.yarn_beta_slow is None else a.yarn_beta_slow,
        yarn_orig_ctx=a.yarn_orig_ctx or 0,
        kv_offload=a.kv_offload is not False,
        op_offload=a.op_offload is not False,
        control_vectors=_control_vectors(a),
        control_vector_layers=(int(layers[0]), int(layers[1])),
        warmup=a.warmup is not False,
        perf=bool(a.perf),
        ctx_checkpoints=a.ctx_checkpoints,
        swa_full=bool(a.swa_full),
        checkpoint_min_step=a.checkpoint_min_step,
    )
    return load, context
