"""llama-server's sampling options (``--top-k`` ... ``--json-schema-file``): declared here,
turned into the server's sampling defaults, which every request's own fields override (as
llama-server's ``params_from_json_cmpl`` starts from the command line's). Standard library
only: ``--help`` must work without the server extra."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from pyllama.server.flags.paths import read_text

__all__ = ["SAMPLER_CHARS", "add_sampling_flags", "sampling_defaults"]

# --sampler-seq letters (llama.cpp's common_sampler_type_to_chr) to sampler names
SAMPLER_CHARS = {
    "d": "dry",
    "k": "top_k",
    "y": "typ_p",
    "p": "top_p",
    "s": "top_n_sigma",
    "m": "min_p",
    "t": "temperature",
    "x": "xtc",
    "i": "infill",
    "e": "penalties",
    "a": "adaptive_p",
}

# (spellings, request field, type, LLAMA_ARG_* variable or None)
_NUMBERS: list[tuple[tuple[str, ...], str, type, str | None]] = [
    (("--top-k",), "top_k", int, "LLAMA_ARG_TOP_K"),
    (("--top-p",), "top_p", float, "LLAMA_ARG_TOP_P"),
    (("--min-p",), "min_p", float, "LLAMA_ARG_MIN_P"),
    (("--top-nsigma", "--top-n-sigma"), "top_n_sigma", float, None),
    (("--xtc-probability",), "xtc_probability", float, None),
    (("--xtc-threshold",), "xtc_threshold", float, None),
    (("--typical", "--typical-p"), "typical_p", float, None),
    (("--repeat-last-n",), "repeat_last_n", int, None),
    (("--repeat-penalty",), "repeat_penalty", float, "LLAMA_ARG_REPEAT_PENALTY"),
    (("--presence-penalty",), "presence_penalty", float, "LLAMA_ARG_PRESENCE_PENALTY"),
    (("--frequency-penalty",), "frequency_penalty", float, "LLAMA_ARG_FREQUENCY_PENALTY"),
    (("--dry-multiplier",), "dry_multiplier", float, None),
    (("--dry-base",), "dry_base", float, None),
    (("--dry-allowed-length",), "dry_allowed_length", int, None),
    (("--dry-penalty-last-n",), "dry_penalty_last_n", int, None),
    (("--adaptive-target",), "adaptive_target", float, None),
    (("--adaptive-decay",), "adaptive_decay", float, None),
    (("--dynatemp-range",), "dynatemp_range", float, None),
    (("--dynatemp-exp",), "dynatemp_exponent", float, None),
    (("--mirostat",), "mirostat", int, None),
    (("--mirostat-lr",), "mirostat_eta", float, None),
    (("--mirostat-ent",), "mirostat_tau", float, None),
]
# token counts llama-server refuses below 0 (-1 is not "the whole context" there)
_COUNTS = ("repeat_last_n", "dry_penalty_last_n")
DEST = "sampling_"  # argparse destinations: sampling_<request field>


def add_sampling_flags(flag: Any) -> None:
    for names, field, kind, env in _NUMBERS:
        flag(*names, dest=DEST + field, type=kind, default=None, env=env, help=f"default {field}")
    flag("--samplers", dest=DEST + "samplers", help="samplers in order, separated by ';'")
    flag(
        "--sampler-seq",
        "--sampling-seq",
        dest=DEST + "sampler_seq",
        help="samplers as letters (edskypmxt)",
    )
    flag("--ignore-eos", dest=DEST + "ignore_eos", action="store_true", default=None)
    flag(
        "--dry-sequence-breaker",
        dest=DEST + "dry_sequence_breakers",
        action="append",
        help="DRY sequence breaker (repeatable; 'none' for none)",
    )
    flag("-l", "--logit-bias", dest=DEST + "logit_bias", action="append", help="TOKEN_ID(+/-)BIAS")
    flag("--grammar", dest=DEST + "grammar", help="GBNF grammar for every request")
    flag("--grammar-file", dest=DEST + "grammar_file", help="file holding that grammar")
    flag("-j", "--json-schema", dest=DEST + "json_schema", help="JSON schema for every request")
    flag("-jf", "--json-schema-file", dest=DEST + "json_schema_file", help="file holding it")


_BIAS = re.compile(r"^\s*(\d+)\s*([+-]\s*\d*\.?\d+(?:[eE][+-]?\d+)?|[+-]?inf)\s*$")


def _logit_bias(items: list[str]) -> dict[str, float]:
    """llama-server's ``TOKEN_ID(+/-)BIAS`` ("15043+1", "15043-inf")."""
    out: dict[str, float] = {}
    for item in items:
        m = _BIAS.match(item)
        if not m:
            raise ValueError(f"--logit-bias: expected TOKEN_ID(+/-)BIAS, got '{item}'")
        out[m.group(1)] = float(m.group(2).replace(" ", ""))
    return out


def _read(path: str, flag: str) -> str:
    return read_text(path, flag)


def sampling_defaults(a: argparse.Namespace) -> dict[str, Any]:
    """The request fields the command line sets (a request's own values win); ValueError
    names a bad option."""
    out: dict[str, Any] = {}
    for names, field, _, _ in _NUMBERS:
        value = getattr(a, DEST + field)
        if value is not None:
            if field in _COUNTS and value < 0:  # llama-server's words
                raise ValueError(f"invalid {names[0][2:]} = {value}")
            out[field] = value
    if getattr(a, DEST + "ignore_eos"):
        out["ignore_eos"] = True
    samplers, seq = getattr(a, DEST + "samplers"), getattr(a, DEST + "sampler_seq")
    if samplers is not None:
        out["samplers"] = [s.strip() for s in samplers.split(";") if s.strip()]
    elif seq is not None:
        unknown = sorted(set(seq) - set(SAMPLER_CHARS))
        if unknown:
            raise ValueError(f"--sampler-seq: unknown sampler letter(s) {''.join(unknown)}")
        out["samplers"] = [SAMPLER_CHARS[c] for c in seq]
    breakers = getattr(a, DEST + "dry_sequence_breakers")
    if breakers is not None:
        out["dry_sequence_breakers"] = [] if breakers == ["none"] else breakers
    bias = getattr(a, DEST + "logit_bias")
    if bias:
        out["logit_bias"] = _logit_bias(bias)
    grammar = getattr(a, DEST + "grammar")
    if getattr(a, DEST + "grammar_file"):
        grammar = _read(getattr(a, DEST + "grammar_file"), "--grammar-file")
    schema = getattr(a, DEST + "json_schema")
    if getattr(a, DEST + "json_schema_file"):
        schema = _read(getattr(a, DEST + "json_schema_file"), "--json-schema-file")
    if grammar is not None and schema is not None:
        raise ValueError("--grammar and --json-schema cannot both be given")
    if grammar is not None:
        out["grammar"] = grammar
    if schema is not None:
        try:
            out["json_schema"] = json.loads(schema)
        except ValueError as e:
            raise ValueError(f"--json-schema: not JSON: {e}") from e
    return out
