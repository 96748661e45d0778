"""A sensible command-line value for each llama-server option (by its metavar, or by name
where the metavar says too little), so that pyllama-server's parser can be asked whether it
takes the option. Files the values name are made in a scratch directory by ``scratch``."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.llama_help import Option

__all__ = ["INFO_SPELLINGS", "enumerated_values", "scratch", "value_for"]

# options that print something and exit 0 while the command line is parsed
INFO_SPELLINGS = frozenset(
    {"-h", "--help", "--usage", "--version", "--completion-bash", "-cl", "--cache-list"}
    | {"--list-devices"}
)

# by metavar
_BY_METAVAR = {
    "N": "1",
    "P": "0.5",
    "M": "0x3",
    "lo-hi": "0-1",
    "<0|1>": "1",
    "<0...100>": "10",
    "TYPE": "q8_0",
    "MODE": "auto",
    "LEVEL": "high",
    "PORT": "8080",
}


def _special(tmp: Path) -> dict[str, list[str]]:
    """By an option's long spelling: where the metavar alone gives no valid value."""
    one = {
        "--rpc": "127.0.0.1:9",
        "--main-gpu": "0",
        "--seed": "1",
        "--json-schema-file": str(tmp / "schema.json"),
        "--spec-synth-len": "2",
        "--webui-config": "{}",
        "--webui-config-file": str(tmp / "ui.json"),
        "--models-dir": str(tmp),
        "--slot-prompt-similarity": "0.5",
        "--sleep-idle-seconds": "10",
        "--override-kv": "general.name=str:x",
        "--override-tensor": "exps=CPU",
        "--override-tensor-draft": "exps=CPU",
        "--numa": "distribute",
        "--rope-scaling": "yarn",
        "--log-colors": "on",
        "--fit": "off",
        "--fit-target": "512",
        "--device": "none",
        "--device-draft": "none",
        "--mmproj-device": "none",
        "--split-mode": "layer",
        "--tensor-split": "1",
        "--flash-attn": "auto",
        "--pooling": "mean",
        "--reasoning-format": "auto",
        "--reasoning": "auto",
        "--reasoning-effort": "high",
        "--reasoning-budget": "5",
        "--spec-type": "none",
        "--hf-repo": "org/model:Q4_0",
        "--hf-repo-draft": "org/draft:Q4_0",
        "--docker-repo": "gemma3",
        "--model-url": "http://127.0.0.1:9/x.gguf",
        "--mmproj-url": "http://127.0.0.1:9/p.gguf",
        "--samplers": "top_k;temperature",
        "--sampler-seq": "kt",
        "--logit-bias": "15+1",
        "--grammar": 'root ::= "a"',
        "--json-schema": "{}",
        "--chat-template-kwargs": "{}",
        "--ui-config": "{}",
        "--lora-scaled": f"{tmp / 'file.gguf'}:0.5",
        "--control-vector-scaled": f"{tmp / 'file.gguf'}:0.5",
        "--api-prefix": "/x",
        "--host": "127.0.0.1",
        "--cors-origins": "localhost",
        "--tools": "get_info",
        "--mcp-servers-json": "{}",
        "--spec-synth-rates": "0.5",
        "--dry-sequence-breaker": "none",
        "--ui-config-file": str(tmp / "ui.json"),
        "--api-key-file": str(tmp / "keys.txt"),
        "--models-preset": str(tmp / "presets.ini"),
        "--mcp-servers-config": str(tmp / "mcp.json"),
        "--path": str(tmp),
        "--media-path": str(tmp),
    }
    out = {name: [v] for name, v in one.items()}
    out["--control-vector-layer-range"] = ["1", "2"]
    return out


def scratch(tmp: Path) -> Path:
    """The files the values name, written under ``tmp``."""
    (tmp / "file.gguf").write_bytes(b"GGUF")
    (tmp / "ui.json").write_text("{}")
    (tmp / "keys.txt").write_text("k\n")
    (tmp / "presets.ini").write_text("[m]\nmodel = x.gguf\n")
    (tmp / "schema.json").write_text('{"type": "string"}')
    (tmp / "mcp.json").write_text('{"mcpServers": {}}')
    return tmp


def value_for(option: Option, tmp: Path) -> list[str]:
    """The argument(s) that follow any spelling of ``option`` (none for a switch)."""
    special = _special(tmp)
    name = next((s for s in option.spellings if s in special), None)
    if name is not None:
        return special[name]
    meta = option.metavar
    if not meta:
        return []
    if meta in _BY_METAVAR:
        return [_BY_METAVAR[meta]]
    if meta == "DIR":
        return [str(tmp)]
    if meta in ("FNAME", "FILE", "PATH", "JINJA_TEMPLATE_FILE") or "FILE" in meta:
        return [str(tmp / "file.gguf")]
    return ["x"]


_WORD = r"[a-z0-9][a-z0-9_.-]*"


def enumerated_values(option: Option) -> list[str]:
    """The values llama-server's --help lists for ``option`` (``{a,b}``, ``[a|b]``, a
    comma-separated metavar of names, or "allowed values: a, b"); empty if it lists none."""
    meta = option.metavar
    for pattern, sep in ((r"^\{(.*)\}$", ","), (r"^\[(.*)\]$", "|")):
        m = re.match(pattern, meta)
        if m:
            return [v.strip() for v in m.group(1).split(sep)]
    if re.fullmatch(rf"{_WORD}(,{_WORD})+", meta):
        return meta.split(",")
    m = re.search(rf"allowed values: ({_WORD}(?:, {_WORD})*)", " ".join(option.help))
    return m.group(1).split(", ") if m else []
