"""Every option of the vendored llama-server's --help, under each spelling and its
LLAMA_ARG_* variable, is taken by pyllama-server, except the ones listed in
flags_pending.txt (issue 20 works through them). The list is kept exact both ways: a
llama.cpp update that adds an option fails here until pyllama takes it or lists it, and a
handled option must leave the list."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyllama.server.flags import build_parser

from helpers.llama_help import server_options
from helpers.peer import require_peer

PENDING_FILE = Path(__file__).with_name("flags_pending.txt")


def _pending() -> set[str]:
    lines = PENDING_FILE.read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_every_llama_server_option_is_taken_or_pending() -> None:
    options = server_options(require_peer())
    assert len(options) > 200  # the --help parser read the whole table
    parser, envs = build_parser()
    ours = set(parser._option_string_actions)
    our_envs = {var for var, _ in envs.values()}
    missing = {s for o in options for s in o.spellings if s not in ours}
    missing |= {o.env for o in options if o.env and o.env not in our_envs}
    pending = _pending()
    assert sorted(missing - pending) == [], "new in llama-server: take them or list them"
    assert sorted(pending - missing) == [], "taken now: delete them from flags_pending.txt"


def test_help_sections_are_llama_servers() -> None:
    """``--help`` lists each option under llama-server's section for it."""
    options = server_options(require_peer())
    parser, _ = build_parser()
    section = {
        opt: group.title
        for group in parser._action_groups
        for action in group._group_actions
        for opt in action.option_strings
    }
    wrong = {
        o.spellings[-1]: (section.get(o.spellings[-1]), o.section)
        for o in options
        if section.get(o.spellings[-1]) != o.section and o.spellings[-1] not in ("-h", "--help")
    }
    assert wrong == {}


# values that make sense for an option's metavar (files exist; see _value)
VALUES = {
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


def _value(option, tmp: Path) -> list[str]:
    meta = option.metavar
    name = next((s for s in option.spellings if s in _SPECIAL), option.spellings[-1])
    special = {
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
        "--control-vector-layer-range": "1 2",
        "--numa": "distribute",
        "--rope-scaling": "yarn",
        "--log-colors": "on",
        "--fit": "off",
        "--fit-target": "512",
        "--device": "none",
        "--device-draft": "none",
        "--spec-draft-device": "none",
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
    }
    assert set(special) <= _SPECIAL
    if name in special:
        return (
            special[name].split(" ") if name == "--control-vector-layer-range" else [special[name]]
        )
    if not meta:
        return []
    if meta in VALUES:
        return [VALUES[meta]]
    if meta in ("FNAME", "FILE", "PATH", "DIR", "JINJA_TEMPLATE_FILE") or "FILE" in meta:
        return (
            [str(tmp / "file.gguf")]
            if meta != "DIR" and name not in ("--path", "--media-path")
            else [str(tmp)]
        )
    return ["x"]


_SPECIAL = {
    "--rpc", "--main-gpu", "--seed", "--json-schema-file", "--spec-synth-len", "--webui-config",
    "--webui-config-file", "--models-dir", "--slot-prompt-similarity", "--sleep-idle-seconds",
    "--override-kv", "--override-tensor", "--override-tensor-draft", "--control-vector-layer-range",
    "--numa", "--rope-scaling", "--log-colors", "--fit", "--fit-target", "--device",
    "--device-draft", "--spec-draft-device", "--mmproj-device", "--split-mode", "--tensor-split",
    "--flash-attn", "--pooling", "--reasoning-format", "--reasoning", "--reasoning-effort",
    "--reasoning-budget", "--spec-type", "--hf-repo", "--hf-repo-draft", "--docker-repo",
    "--model-url", "--mmproj-url", "--samplers", "--sampler-seq", "--logit-bias", "--grammar",
    "--json-schema", "--chat-template-kwargs", "--ui-config", "--lora-scaled",
    "--control-vector-scaled", "--api-prefix", "--host", "--cors-origins", "--tools",
    "--mcp-servers-json", "--spec-synth-rates", "--dry-sequence-breaker", "--ui-config-file",
    "--api-key-file", "--models-preset",
}  # fmt: skip


def test_every_option_parses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every spelling of every llama-server option, with a sensible value, is taken:
    parsed into settings, or refused with a message naming what is wrong (a device, a
    file, a feature pyllama lacks) -- never "unrecognized arguments"."""
    from pyllama.server.cli import parse_args

    (tmp_path / "file.gguf").write_bytes(b"GGUF")
    (tmp_path / "ui.json").write_text("{}")
    (tmp_path / "keys.txt").write_text("k\n")
    (tmp_path / "presets.ini").write_text("[m]\nmodel = x.gguf\n")
    (tmp_path / "schema.json").write_text('{"type": "string"}')
    refused: dict[str, str] = {}
    for option in server_options(require_peer()):
        for spelling in option.spellings:
            if spelling in ("-h", "--help", "--usage", "--completion-bash", "--version"):
                continue
            argv = [spelling, *_value(option, tmp_path)]
            try:
                parse_args(argv, environ={})
            except SystemExit as e:
                err = capsys.readouterr().err
                if e.code != 0:
                    refused[" ".join(argv)] = err.strip().splitlines()[-2] if err else ""
    # what is refused, and why: each message names its option
    assert all("unrecognized" not in m and "expected" not in m for m in refused.values()), refused
    assert sorted({k.split(" ")[0] for k in refused}) == sorted(REFUSED), refused


# refused on purpose, each with a message naming it (see the issue 20 note)
REFUSED = [
    # no RPC server answers at the address given
    "--rpc",
    # removed from llama.cpp: its error, naming the replacement
    "--draft",
    "--draft-n",
    "--draft-max",
    "--draft-min",
    "--draft-n-min",
    "--spec-ngram-size-n",
    "--spec-ngram-size-m",
    "--spec-ngram-min-hits",
    # synthetic acceptance with no speculative decoder to accept drafts of
    "--spec-synth-len",
    "--spec-synth-rates",
]
