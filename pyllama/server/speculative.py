"""llama-server's speculative-decoding options: ``--spec-type`` and synthetic acceptance
(``--spec-synth-len`` / ``--spec-synth-rates``, for benchmarking the draft path: draft
tokens are accepted at random instead of by agreement with the target model)."""

from __future__ import annotations

import math

__all__ = [
    "NGRAM_TYPES",
    "SUPPORTED_TYPES",
    "conditional_probs",
    "n_max",
    "parse_types",
    "refuse_heads",
    "synth_rates",
    "uses_draft_model",
]

# llama.cpp's names
KNOWN_TYPES = (
    "none",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
NGRAM_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
# the EAGLE3 / DFlash / DSpark kinds draft with a draft-head model (-md) and MTP with the
# target's own MTP layers; pyllama runs none of those heads (see refuse_heads)
SUPPORTED_TYPES = ("none", "draft-simple", *NGRAM_TYPES)
HEAD_TYPES = ("draft-eagle3", "draft-dflash", "draft-dspark")


def parse_types(value: str) -> list[str]:
    """A comma-separated ``--spec-type``. As in llama.cpp, ``none`` adds nothing: the list
    is the other names, or ``["none"]`` (no speculation) when it names nothing else."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    for name in names:
        if name not in KNOWN_TYPES:
            raise ValueError(f"unknown speculative type: {name}")
    kinds = list(dict.fromkeys(n for n in names if n != "none"))
    return kinds or ["none"]


def refuse_heads(types: list[str], has_draft: bool) -> str | None:
    """Why pyllama cannot start with these types, or None. As in llama-server, a draft-head
    type with no draft model adds nothing; with one, or ``draft-mtp`` (which llama-server
    builds from the target's MTP layers, failing the load where there are none), pyllama
    refuses: it runs no EAGLE3, DFlash, DSpark or MTP heads."""
    if "draft-mtp" in types:
        return "draft-mtp: pyllama has no multi-token-prediction drafting"
    heads = [t for t in types if t in HEAD_TYPES]
    if heads and has_draft:
        return f"{heads[0]}: pyllama drafts only with a plain draft model (draft-simple)"
    return None


def uses_draft_model(types: list[str]) -> bool:
    """Whether a draft model (-md) drafts: as in the pinned llama-server, only when
    ``--spec-type`` names draft-simple (its default is none; -md alone drafts nothing)."""
    return "draft-simple" in types


def n_max(types: list[str], draft_n_max: int, ngram_sizes: dict[str, int]) -> int:
    """The longest draft the enabled decoders make (llama.cpp's common_speculative_n_max):
    synthetic acceptance has one rate per position up to it. ``ngram_sizes`` maps each
    n-gram kind to its longest draft (m-gram size, ngram-mod's n_max, ngram-cache's 8)."""
    out = 0
    for t in types:
        if t == "draft-simple":
            out = max(out, draft_n_max)
        elif t in ngram_sizes:
            out = max(out, ngram_sizes[t])
    return out


def synth_rates(n_max: int, length: float | None, rates: list[float] | None) -> list[float]:
    """The unconditional acceptance rate of each draft position, as llama.cpp resolves
    them: given outright (non-increasing, in [0, 1], one per drafted token), or from a
    target mean acceptance length L (drafted tokens accepted + the target's), solved for
    a geometric p with p + p^2 + ... + p^n_max = L - 1. Empty when neither is given."""
    if length is None and not rates:
        return []
    if length is not None and rates:
        raise ValueError("synthetic acceptance length and rates are mutually exclusive")
    if n_max <= 0:
        raise ValueError("synthetic acceptance requires at least one speculative token")
    if rates:
        if len(rates) != n_max:
            raise ValueError(
                f"synthetic acceptance rates must contain {n_max} values, got {len(rates)}"
            )
        for i, r in enumerate(rates):
            if not math.isfinite(r) or not 0.0 <= r <= 1.0:
                raise ValueError("synthetic acceptance rates must be finite and within [0, 1]")
            if i and r > rates[i - 1]:
                raise ValueError("synthetic acceptance rates must be monotonically non-increasing")
        return list(rates)
    assert length is not None
    top = n_max + 1.0
    if not math.isfinite(length) or not 1.0 <= length <= top:
        raise ValueError(f"synthetic acceptance length must be finite and within [1, {top:.0f}]")
    p = 1.0 if length == top else 0.0
    if 1.0 < length < top:
        lo, hi = 0.0, 1.0
        for _ in range(32):  # bisection on the geometric sum
            mid = 0.5 * (lo + hi)
            total = sum(mid ** (j + 1) for j in range(n_max))
            lo, hi = (mid, hi) if total < length - 1.0 else (lo, mid)
        p = 0.5 * (lo + hi)
    return [p ** (i + 1) for i in range(n_max)]


def conditional_probs(rates: list[float]) -> list[float]:
    """Position i's acceptance chance given position i-1 was accepted (what the engine
    draws against)."""
    out, prev = [], 1.0
    for r in rates:
        out.append(r / prev if prev > 0.0 else 0.0)
        prev = r
    return out
