"""Whether ``pyllama-server`` starts as a router, by llama-server's rules, and the one
place pyllama differs: a machine with nothing to route gets the demo model.

llama-server is a router when no model is given (``-m``, ``-hf``, ``-dr``, ``-mu``), and
when ``-hf`` names a repository that holds a ``preset.ini`` (its presets are then the
router's models). pyllama-server follows both, except that with no model flag, no router
flag and an empty llama.cpp model cache it serves the demo model, where llama-server would
start a router with nothing to serve: ``pip install`` then ``pyllama-server`` answers
chats in the first minute. The choice is said on stderr.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

__all__ = ["Mode", "choose"]


@dataclass(frozen=True)
class Mode:
    router: bool
    preset: str | None = None  # the preset.ini an -hf preset repository gave


def _say(message: str) -> None:
    print(f"pyllama-server: {message}", file=sys.stderr, flush=True)


def choose(a: argparse.Namespace) -> Mode:
    """``a``: the parsed flags (``model``, ``hf_repo``, ``docker_repo``, ``model_url``,
    ``models_dir``, ``models_preset``, ``models_max``, ``models_autoload``, ``offline``,
    ``hf_token``). May fetch a ``preset.ini`` (as llama-server does at start)."""
    try:
        from pyllama import hub  # httpx: the server extra's, which main() asks for next
    except ImportError:
        return Mode(False)
    if a.model is not None:
        return Mode(False)
    if any(v is not None for v in (a.models_dir, a.models_preset, a.models_max, a.models_autoload)):
        return Mode(True)
    if a.hf_repo:
        try:
            found = hub.preset(a.hf_repo, offline=bool(a.offline), token=a.hf_token)
        except (hub.HubError, ValueError, OSError):
            found = None  # the model's download says what is wrong
        if found is None:
            return Mode(False)
        _say(f"using preset.ini from hub repository '{a.hf_repo}' (router mode)")
        _say("only use presets you trust: a preset's keys become server flags")
        return Mode(True, str(found))
    if a.docker_repo or a.model_url:
        return Mode(False)
    try:
        cached = hub.list_cached()
    except OSError:
        cached = []
    if cached:
        _say(
            f"no model given: a router over the {len(cached)} model(s) in llama.cpp's cache "
            f"({hub.cache_directory()}), as llama-server (-m FILE serves one model)"
        )
        return Mode(True)
    return Mode(False)  # the demo model (pyllama.models.demo_model)
