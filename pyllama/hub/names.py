"""Which files of a hub repository a model name stands for, as llama.cpp chooses them
(``common/download.cpp``): the tag at the end of a GGUF file name, the shards of a split
model, the projector beside a model. Names and paths only: no cache, no network."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "DEFAULT_TAGS",
    "SIDECARS",
    "SplitInfo",
    "find_best_mmproj",
    "find_best_model",
    "shards",
    "split_info",
]

SIDECARS = ("mmproj", "mtp-", "eagle3-", "dflash-", "dspark-")
DEFAULT_TAGS = ("Q4_K_M", "Q8_0")  # tried in order when a name has no tag


@dataclass(frozen=True)
class SplitInfo:
    prefix: str  # the path without ".gguf" and without "-0000i-of-0000n"
    tag: str  # upper case; "" when the name ends in none
    index: int
    count: int


_SPLIT = re.compile(r"(.+)-([0-9]{5})-of-([0-9]{5})", re.IGNORECASE)
_NAME_TAG = re.compile(r"[-.]([A-Z0-9_]+)\Z", re.IGNORECASE)


def split_info(path: str) -> SplitInfo | None:
    """What a GGUF file name says: its tag and, for a split model, which shard it is."""
    if not path.endswith(".gguf"):
        return None
    prefix, index, count = path[: -len(".gguf")], 1, 1
    m = _SPLIT.fullmatch(prefix)
    if m:
        prefix, index, count = m[1], int(m[2]), int(m[3])
    m = _NAME_TAG.search(prefix)
    return SplitInfo(prefix, m[1].upper() if m else "", index, count)


def _is_model_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".gguf") and not any(
        word in name for word in ("mmproj", "imatrix", *SIDECARS[1:])
    )


def find_best_model(paths: list[str], tag: str) -> str | None:
    """The file a name with ``tag`` stands for (llama.cpp's ``find_best_model``): the first
    model file whose name holds the tag before a ``.`` or ``-``; without a tag, Q4_K_M,
    then Q8_0, then the first model file. Only a split model's first shard is chosen."""

    def first_shard(path: str) -> bool:
        info = split_info(path)
        return info is not None and (info.count <= 1 or info.index == 1)

    for want in (tag,) if tag else DEFAULT_TAGS:
        pattern = re.compile(re.escape(want) + "[.-]", re.IGNORECASE)
        for path in paths:
            if _is_model_file(path) and pattern.search(path) and first_shard(path):
                return path
    if not tag:
        for path in paths:
            if _is_model_file(path) and first_shard(path):
                return path
    return None


def _quant_bits(path: str) -> int:
    info = split_info(path)
    m = re.search(r"\d+", info.tag if info is not None else "")
    return int(m.group()) if m else 0


def find_best_mmproj(paths: list[str], model: str) -> str | None:
    """The projector beside ``model`` (llama.cpp's ``find_best_sibling`` for "mmproj"): a
    ``*mmproj*.gguf`` in the model's folder or one above it, the deepest shared folder
    first, then the quantization closest to the model's."""
    model_dir = model.split("/")[:-1]
    bits = _quant_bits(model)
    best, best_key = None, (-1, 0)
    for path in paths:
        if not path.endswith(".gguf") or "mmproj" not in path:
            continue
        sib_dir = path.split("/")[:-1]
        if model_dir[: len(sib_dir)] != sib_dir:
            continue  # only the model's folder and the folders above it
        key = (len(sib_dir), -abs(_quant_bits(path) - bits))
        if key > best_key:
            best, best_key = path, key
    return best


def shards(paths: list[str], primary: str) -> list[str]:
    """Every file of a split model (just ``primary`` if it is a single file)."""
    info = split_info(primary)
    if info is None or info.count <= 1:
        return [primary]
    out = []
    for path in paths:
        other = split_info(path)
        if other is not None and (other.prefix, other.count) == (info.prefix, info.count):
            out.append(path)
    return out
