"""llama-server's options as its ``--help`` lists them: each option's spellings and its
environment variable. The peer binary (ci/build_peer.sh) is the source, so a llama.cpp
update that adds an option shows up here."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Option", "parse_help", "server_options"]


@dataclass
class Option:
    spellings: list[str]
    metavar: str = ""
    env: str = ""
    section: str = ""
    help: list[str] = field(default_factory=list)


_HEAD = re.compile(
    r"^(?P<names>-[^\s,]+(?:,\s*-[^\s,]+)*)(?:\s(?P<meta>\S.*?))?(?:\s{2,}(?P<help>.*))?$"
)


def parse_help(text: str) -> list[Option]:
    out: list[Option] = []
    section = ""
    for line in text.splitlines():
        if line.startswith("-----"):
            section = line.strip("- ")
            continue
        if line.startswith("-"):
            m = _HEAD.match(line.rstrip())
            if not m:
                raise ValueError(f"unparsed --help line: {line!r}")
            names = [n.strip() for n in m.group("names").split(",")]
            out.append(
                Option(names, (m.group("meta") or "").strip(), "", section, [m.group("help") or ""])
            )
        elif out and line.strip():
            env = re.search(r"\(env: ([A-Z0-9_]+)\)", line)
            if env:
                out[-1].env = env.group(1)
            out[-1].help.append(line.strip())
    return out


def server_options(binary: str | Path) -> list[Option]:
    text = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    return parse_help(text)
