"""--perf / --no-perf (LLAMA_ARG_PERF) act as in llama-server: they set the context's
``no_perf``, and libllama then measures (or not) the time its decodes take. Neither
server prints those timings (llama-server reads only ``n_reused`` of them), so the test
reads them as llama.cpp keeps them: a small library preloaded into pyllama-server
(compiled here against the vendored llama.h) wraps ``llama_free`` and prints each
context's ``llama_perf_context`` before freeing it. After a request, the serving context
has counted its prompt and generated tokens either way; their times are above zero only
with the timings on. The last of --perf / --no-perf wins, and a flag beats the variable.
The peer is linked statically, so nothing can be preloaded into it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest

from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy

VENDOR = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include "llama.h"

/* libllama as the process loaded it (privately: RTLD_NEXT cannot see it) */
static void * real(const char * name) {
    void * lib = dlopen("libllama.so", RTLD_NOW | RTLD_NOLOAD);
    return lib ? dlsym(lib, name) : NULL;
}

void llama_free(struct llama_context * ctx) {
    void (*free_ctx)(struct llama_context *) = (void (*)(struct llama_context *)) real("llama_free");
    struct llama_perf_context_data (*perf)(const struct llama_context *) =
        (struct llama_perf_context_data (*)(const struct llama_context *)) real("llama_perf_context");
    if (ctx && perf) {
        struct llama_perf_context_data d = perf(ctx);
        fprintf(stderr, "perf-shim: n_p_eval=%d t_p_eval_ms=%f n_eval=%d t_eval_ms=%f\n",
                d.n_p_eval, d.t_p_eval_ms, d.n_eval, d.t_eval_ms);
        fflush(stderr);
    }
    free_ctx(ctx);
}
"""
RECORD = re.compile(r"perf-shim: n_p_eval=(\d+) t_p_eval_ms=(\S+) n_eval=(\d+) t_eval_ms=(\S+)")


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("--perf effect test: no C compiler to build its llama_free wrapper")
    if not (VENDOR / "include" / "llama.h").is_file():
        pytest.skip(f"--perf effect test: no llama.h under {VENDOR} (a source checkout)")
    out = tmp_path_factory.mktemp("perf_shim")
    (out / "shim.c").write_text(SHIM)
    includes = ["-I", str(VENDOR / "include"), "-I", str(VENDOR / "ggml" / "include")]
    cmd = [cc, "-shared", "-fPIC", *includes, str(out / "shim.c"), "-o", str(out / "shim.so")]
    subprocess.run([*cmd, "-ldl"], check=True)
    return out / "shim.so"


def serving_context_perf(
    shim: Path, args: list[str], env: dict[str, str]
) -> tuple[int, bool, int, bool]:
    """(n_p_eval, t_p_eval_ms > 0, n_eval, t_eval_ms > 0) of the context that served one
    four-token completion, printed when the server freed it at exit."""
    with tempfile.TemporaryFile() as log:
        cmd = [*PYLLAMA_SERVER, *args, "-c", "512", "-np", "1", "-t", "2"]
        proc, url = start_process(cmd, stdout=log, env={**env, "LD_PRELOAD": str(shim)})
        try:
            wait_healthy(url, proc)
            body = {"prompt": "The capital of France is", "n_predict": 4, "temperature": 0}
            assert httpx.post(url + "/completion", json=body, timeout=60).status_code == 200
        finally:
            stop_process(proc)
        log.seek(0)
        text = log.read().decode(errors="replace")
    records = [(int(p), float(tp), int(e), float(te)) for p, tp, e, te in RECORD.findall(text)]
    assert records, f"no context freed at exit:\n{text[-3000:]}"
    n_p, t_p, n_e, t_e = max(records, key=lambda r: r[2])  # the one that generated
    return n_p, t_p > 0, n_e, t_e > 0


@pytest.mark.flag_effect("--perf", "--no-perf")
@pytest.mark.parametrize(
    ("args", "env", "timed"),
    [
        (["--perf"], {}, True),
        (["--perf", "--no-perf"], {}, False),
        ([], {"LLAMA_ARG_PERF": "1"}, True),
        (["--no-perf"], {"LLAMA_ARG_PERF": "1"}, False),
    ],
    ids=["perf", "perf-then-no-perf", "env", "env-and-no-perf"],
)
def test_perf_turns_libllamas_timings_on_and_no_perf_off(
    shim: Path, smollm_path: str, args: list[str], env: dict[str, str], timed: bool
) -> None:
    n_p_eval, p_timed, n_eval, e_timed = serving_context_perf(shim, ["-m", smollm_path, *args], env)
    assert n_p_eval > 0 and n_eval == 3  # counted either way
    assert (p_timed, e_timed) == (timed, timed)
