"""llama-server's CPU placement options for ggml's compute threads: ``--cpu-mask``,
``--cpu-range``, ``--cpu-strict``, ``--prio``, ``--poll``, each also for batch processing
(``-batch``) and for the draft model (``-draft``, ``--spec-draft-*``), and the draft
model's thread counts. Standard library only."""

from __future__ import annotations

import argparse
import logging
import re

from pyllama.server.flags.table import FlagTable
from pyllama.server.settings import CpuPlacement

__all__ = ["DEFAULT_POLL", "add_cpu_flags", "cpu_placements", "polls_set"]

log = logging.getLogger("pyllama.server")
_FIELDS = ("mask", "range", "strict", "prio", "poll")
_OPTION = {"mask": "cpu-mask", "range": "cpu-range", "strict": "cpu-strict"}  # else the field
DEFAULT_POLL = 50  # ggml_threadpool_params_default's

_ROLES = {
    # role: (section, flag suffix, short-option suffix, --spec-draft-* spellings)
    "": ("common", "", "", False),
    "batch": ("common", "-batch", "b", False),
    "draft": ("speculative", "-draft", "d", True),
    "batch_draft": ("speculative", "-batch-draft", "bd", True),
}


def _spellings(long: str, short: str | None, role: str) -> list[str]:
    _, suffix, short_suffix, spec = _ROLES[role]
    names = [f"--{long}{suffix}"]
    if short is not None and role != "batch_draft":
        names.insert(0, f"-{short}{short_suffix}")
    elif short == "C" and role == "batch_draft":
        names.insert(0, "-Cbd")  # llama-server has it for the mask only
    if spec:
        tail = "-batch" if role == "batch_draft" else ""
        names.insert(0, f"--spec-draft-{long}{tail}")
    return names


def add_cpu_flags(t: FlagTable) -> None:
    for role, (section, *_rest) in _ROLES.items():
        t.section(section)
        dest = f"cpu_{role}_" if role else "cpu_"
        t.flag(
            *_spellings("cpu-mask", "C", role),
            dest=dest + "mask",
            metavar="M",
            help="CPU affinity mask: arbitrarily long hex (complements the range)",
        )
        if role != "batch_draft":  # llama-server has no --cpu-range-batch-draft
            t.flag(
                *_spellings("cpu-range", "Cr", role),
                dest=dest + "range",
                metavar="lo-hi",
                help="range of CPUs for affinity (complements the mask)",
            )
        t.flag(
            *_spellings("cpu-strict", None, role),
            dest=dest + "strict",
            type=int,
            metavar="<0|1>",
            help="strict CPU placement: one thread per CPU of the mask",
        )
        t.flag(
            *_spellings("prio", None, role),
            dest=dest + "prio",
            type=int,
            metavar="N",
            help="thread priority: low(-1), normal(0), medium(1), high(2), realtime(3)",
        )
        t.flag(
            *_spellings("poll", None, role),
            dest=dest + "poll",
            type=int,
            metavar="<0...100>",
            help="polling level while waiting for work (0: none; default: 50)",
        )
    t.section("speculative")
    t.flag(
        "--spec-draft-threads",
        "-td",
        "--threads-draft",
        dest="draft_threads",
        type=int,
        default=-1,
        metavar="N",
        help="draft model threads (default: --threads)",
    )
    t.flag(
        "--spec-draft-threads-batch",
        "-tbd",
        "--threads-batch-draft",
        dest="draft_threads_batch",
        type=int,
        default=-1,
        metavar="N",
        help="draft model batch threads (default: --threads-draft)",
    )


def _placement(a: argparse.Namespace, role: str, base: CpuPlacement | None) -> CpuPlacement | None:
    """The role's placement, its unset fields taken from ``base`` (llama-server's
    "default: same as ..."); None when nothing is set and there is no base."""
    dest = f"cpu_{role}_" if role else "cpu_"
    fields = {k: getattr(a, dest + k, None) for k in _FIELDS}
    if all(v is None for v in fields.values()):
        return base
    start = base or CpuPlacement()
    mask, rng = fields["mask"], fields["range"]
    if mask is not None and not re.fullmatch(r"(0[xX])?[0-9a-fA-F]+", mask):
        raise ValueError(f"invalid cpumask {mask!r} (--cpu-mask{_ROLES[role][1]})")
    if rng is not None and not re.fullmatch(r"\d*-\d*", rng):
        raise ValueError(f"invalid range {rng!r} (--cpu-range{_ROLES[role][1]}: lo-hi)")
    prio = start.priority if fields["prio"] is None else fields["prio"]
    low = -1 if role == "" else 0  # llama-server takes low (-1) for --prio only
    if fields["prio"] is not None and not low <= prio <= 3:
        raise ValueError(f"invalid value for --prio{_ROLES[role][1]}: {prio} ({low} ... 3)")
    poll = start.poll if fields["poll"] is None else fields["poll"]
    if not 0 <= poll <= 100:
        raise ValueError(f"invalid value for --poll{_ROLES[role][1]}: {poll} (0 ... 100)")
    return CpuPlacement(
        mask=start.mask if mask is None else mask,
        range=start.range if rng is None else rng,
        strict=start.strict if fields["strict"] is None else fields["strict"],
        priority=prio,
        poll=poll,
    )


def polls_set(a: argparse.Namespace) -> list[tuple[str, int]]:
    """(option, value) of each --poll* given a value other than the default."""
    out = []
    for role, (_, suffix, _, _) in _ROLES.items():
        value = getattr(a, f"cpu_{role}_poll" if role else "cpu_poll", None)
        if value is not None and value != DEFAULT_POLL:
            out.append((f"--poll{suffix}", value))
    return out


def cpu_placements(a: argparse.Namespace) -> dict[str, CpuPlacement | None]:
    """ContextOptions' cpu, cpu_batch, draft_cpu and draft_cpu_batch; ValueError names a
    bad option."""
    cpu = _placement(a, "", None) or CpuPlacement()
    # llama-server: without --threads-batch the batch pool is the main one, whatever the
    # -batch placement options say (said in the log); with it, they start from defaults
    if getattr(a, "n_threads_batch", -1) == -1:
        named = [k for k in _FIELDS if getattr(a, f"cpu_batch_{k}", None) is not None]
        _placement(a, "batch", cpu)  # still validated
        if named:
            log.warning(
                "the batch threads are the main threads without --threads-batch, as in "
                "llama-server: %s ignored",
                ", ".join(f"--{_OPTION.get(k, k)}-batch" for k in named),
            )
        batch = cpu
    else:
        batch = _placement(a, "batch", None) or CpuPlacement()
    draft = _placement(a, "draft", None)
    return {
        "cpu": cpu,
        "cpu_batch": batch,
        "draft_cpu": draft,
        "draft_cpu_batch": _placement(a, "batch_draft", draft),
    }
