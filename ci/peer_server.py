#!/usr/bin/env python3
"""Stand-in for a llama-server binary in llama.cpp's server test suite (ci/peer_tests.sh).

llama.cpp's tests/utils.py starts whatever LLAMA_SERVER_BIN_PATH names with llama-server
flags, and asks for its models from the Hugging Face hub, which a CI box without internet
cannot reach. Pointing LLAMA_SERVER_BIN_PATH at this script rewrites every hub model
request into a local GGUF and then exec()s the real server, so that the server process is
the very process the tests started (terminate/kill reach it directly):

  -hf/-hfr/--hf-repo X, -hff/--hf-file Y, -mu/--model-url U, -dr/--docker-repo X
      -> dropped; "-m PEER_LOCAL_MODEL" is added when no usable -m/--model was given
  -m/--model F (F not an existing file)            -> -m PEER_LOCAL_MODEL
  -md/--model-draft/--spec-draft-model F (missing) -> -md PEER_LOCAL_DRAFT
  -hfd/-hfrd/--hf-repo-draft/--spec-draft-hf X     -> -md PEER_LOCAL_DRAFT
  -mmu/--mmproj-url U, -mm/--mmproj F (missing)    -> dropped (no local projector)
  -hft/--hf-token T                                 -> dropped
  no model and no router flag (llama-server's router mode) -> "--models-max 4" added
Every other argument passes through unchanged, in order. Both servers compared by
ci/peer_tests.sh go through this same script, so they see the same rewritten command line.

Environment:
  PEER_REAL_SERVER   the server to exec (required): a path, or a name looked up on PATH
  PEER_LOCAL_MODEL   the local GGUF standing in for hub models (required)
  PEER_LOCAL_DRAFT   the local GGUF standing in for draft models (default: PEER_LOCAL_MODEL)
  PEER_ARGS_LOG      if set, append "real-server argv" lines to this file (debugging)
Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys

HUB_MAIN = {
    "-hf",
    "-hfr",
    "--hf-repo",
    "-hff",
    "--hf-file",
    "-mu",
    "--model-url",
    "-dr",
    "--docker-repo",
}
HUB_DRAFT = {"--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft"}
MODEL = {"-m", "--model"}
DRAFT = {"-md", "--model-draft", "--spec-draft-model"}
MMPROJ_URL = {"-mmu", "--mmproj-url"}
MMPROJ = {"-mm", "--mmproj"}
DROP = {"-hft", "--hf-token"}
ROUTER = {"--models-dir", "--models-preset", "--models-max", "--models-autoload"}
ROUTER |= {"--no-models-autoload"}
TAKES_VALUE = HUB_MAIN | HUB_DRAFT | MODEL | DRAFT | MMPROJ_URL | MMPROJ | DROP


def rewrite(argv: list[str], local: str, draft: str) -> list[str]:
    out: list[str] = []
    hub = False  # a main model was asked for from the hub (or is missing locally)
    have_model = False
    have_draft = False
    want_draft = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if not (name.startswith("-") and name in TAKES_VALUE):
            out.append(arg)
            i += 1
            continue
        if eq:
            value = inline
            i += 1
        else:
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
        if name in HUB_MAIN:
            hub = True
        elif name in MODEL:
            if os.path.isfile(value) and not have_model:
                out += ["-m", value]
                have_model = True
            else:
                hub = True
        elif name in HUB_DRAFT:
            want_draft = True
        elif name in DRAFT:
            if os.path.isfile(value) and not have_draft:
                out += ["-md", value]
                have_draft = True
            else:
                want_draft = True
        elif name in MMPROJ and os.path.isfile(value):
            out += ["--mmproj", value]
        # MMPROJ_URL and DROP: dropped
    if hub and not have_model:
        out = ["-m", local, *out]
    elif not have_model and not ROUTER & {a.partition("=")[0] for a in out}:
        # no model at all: llama-server's router mode. pyllama-server serves its demo model
        # then, unless a router flag is given; --models-max 4 is llama-server's default, so
        # it changes nothing there and asks pyllama for the same mode.
        out += ["--models-max", "4"]
    if want_draft and not have_draft:
        out += ["-md", draft]
    return out


def main() -> None:
    real = os.environ.get("PEER_REAL_SERVER")
    local = os.environ.get("PEER_LOCAL_MODEL")
    if not real or not local:
        sys.exit("peer_server.py: set PEER_REAL_SERVER and PEER_LOCAL_MODEL")
    exe = real if os.sep in real else shutil.which(real)
    if not exe or not os.access(exe, os.X_OK):
        sys.exit(f"peer_server.py: server not found or not executable: {real}")
    args = rewrite(sys.argv[1:], local, os.environ.get("PEER_LOCAL_DRAFT") or local)
    log = os.environ.get("PEER_ARGS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(" ".join([exe, *args]) + "\n")
    sys.stdout.flush()
    os.execv(exe, [exe, *args])


if __name__ == "__main__":
    main()
