#!/usr/bin/env python3
"""Stand-in for a llama-server binary in llama.cpp's server test suite (ci/peer_tests.sh).

llama.cpp's tests/utils.py starts whatever LLAMA_SERVER_BIN_PATH names with llama-server
flags. ci/peer_tests.sh points it at this script, which exec()s the real server with the
suite's own arguments, so that the server process is the very process the tests started
(terminate/kill reach it directly). One argument is added, in one case only:

  no model at all (no -m/--model, -hf/--hf-repo, -mu/--model-url, -dr/--docker-repo) and
  no router flag (--models-dir, --models-preset, --models-max, --models-autoload...)
      -> "--models-max 4" appended

That is llama-server's router mode (unit/test_router.py starts it so): llama-server
starts a router when no model is given, with --models-max 4 by default, so the flag
changes nothing there; pyllama-server serves its demo model when given no model, and the
flag asks it for the router the tests expect. Models come from the hub the suite names
(ci/peer_tests.sh runs a local stand-in for it), never from this script.

Environment:
  PEER_REAL_SERVER   the server to exec (required): a path, or a name looked up on PATH
  PEER_ARGS_LOG      if set, append "real-server argv" lines to this file (debugging)
Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys

MODEL = {"-m", "--model", "-hf", "-hfr", "--hf-repo", "-mu", "--model-url"}
MODEL |= {"-dr", "--docker-repo"}
ROUTER = {"--models-dir", "--models-preset", "--models-max", "--models-autoload"}
ROUTER |= {"--no-models-autoload"}


def rewrite(argv: list[str]) -> list[str]:
    names = {a.partition("=")[0] for a in argv if a.startswith("-")}
    if names & (MODEL | ROUTER):
        return list(argv)
    return [*argv, "--models-max", "4"]


def main() -> None:
    real = os.environ.get("PEER_REAL_SERVER")
    if not real:
        sys.exit("peer_server.py: set PEER_REAL_SERVER")
    exe = real if os.sep in real else shutil.which(real)
    if not exe or not os.access(exe, os.X_OK):
        sys.exit(f"peer_server.py: server not found or not executable: {real}")
    args = rewrite(sys.argv[1:])
    log = os.environ.get("PEER_ARGS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(" ".join([exe, *args]) + "\n")
    sys.stdout.flush()
    os.execv(exe, [exe, *args])


if __name__ == "__main__":
    main()
