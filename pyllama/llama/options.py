"""llama-cpp-python's ``Llama(...)`` keywords to pyllama's Model and Context arguments.

Values are llama-cpp-python's (ints for ``type_k``, ``pooling_type``, ``split_mode``;
a dict for ``kv_overrides``). A keyword whose value pyllama cannot honour raises a
ValueError that names it; an unknown keyword is a TypeError (llama-cpp-python ignores
both silently).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["GGML_TYPES", "POOLING_TYPES", "cache_type", "kv_override_strings", "split_mode_name"]

# ggml_type values as llama-cpp-python's GGML_TYPE_* constants, for the KV cache types
GGML_TYPES = {
    0: "f32",
    1: "f16",
    2: "q4_0",
    3: "q4_1",
    6: "q5_0",
    7: "q5_1",
    8: "q8_0",
    20: "iq4_nl",
    30: "bf16",
}
POOLING_TYPES = {"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}  # LLAMA_POOLING_TYPE_*
SPLIT_MODES = {0: "none", 1: "layer", 2: "row"}  # LLAMA_SPLIT_MODE_*


def cache_type(name: str, value: int | str | None) -> str:
    if value is None:
        return "f16"
    if isinstance(value, str):
        if value.lower() not in GGML_TYPES.values():
            raise ValueError(f"{name}={value!r}: one of {sorted(GGML_TYPES.values())}")
        return value.lower()
    if value not in GGML_TYPES:
        raise ValueError(
            f"{name}={value}: a KV cache type is one of GGML_TYPE_* {sorted(GGML_TYPES)}"
        )
    return GGML_TYPES[value]


def split_mode_name(value: int | str) -> str:
    if isinstance(value, str) and value in SPLIT_MODES.values():
        return value
    if value not in SPLIT_MODES:
        raise ValueError(f"split_mode={value!r}: LLAMA_SPLIT_MODE_NONE 0, LAYER 1 or ROW 2")
    return SPLIT_MODES[value]  # type: ignore[index]


def kv_override_strings(overrides: Mapping[str, Any] | None) -> list[str]:
    """{key: bool|int|float|str} to llama.cpp's ``KEY=TYPE:VALUE`` (--override-kv)."""
    out = []
    for key, value in (overrides or {}).items():
        if isinstance(value, bool):
            out.append(f"{key}=bool:{str(value).lower()}")
        elif isinstance(value, int):
            out.append(f"{key}=int:{value}")
        elif isinstance(value, float):
            out.append(f"{key}=float:{value}")
        elif isinstance(value, str):
            if len(value.encode()) > 127:
                raise ValueError(f"kv_overrides[{key!r}]: strings are limited to 127 bytes")
            out.append(f"{key}=str:{value}")
        else:
            raise ValueError(
                f"kv_overrides[{key!r}]: {type(value).__name__} is not bool, int, float or str"
            )
    return out


# keywords llama.cpp dropped or pyllama's context cannot set: allowed only at their defaults
UNSUPPORTED_DEFAULTS: Mapping[str, Any] = {
    "rope_scaling_type": -1,
    "yarn_ext_factor": -1.0,
    "yarn_attn_factor": 1.0,
    "yarn_beta_fast": 32.0,
    "yarn_beta_slow": 1.0,
    "yarn_orig_ctx": 0,
    "lora_base": None,
    "tokenizer": None,
    "spm_infill": False,
}


def check_unsupported(values: Mapping[str, Any]) -> None:
    for name, default in UNSUPPORTED_DEFAULTS.items():
        if values[name] != default:
            raise ValueError(
                f"{name}={values[name]!r} is not supported by pyllama (leave it at {default!r})"
            )


def tensor_split_list(value: Sequence[float] | None) -> list[float]:
    return [float(x) for x in value] if value else []
