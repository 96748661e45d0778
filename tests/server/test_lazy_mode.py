"""--lazy-mode acts: on a model with per-layer embeddings (tests/fixtures/tiny_gemma4.py), the
one tensor llama.cpp marks for on-demand reading, ``on`` maps that tensor apart without
faulting it in (llama.cpp logs "lazy read enabled" and a second model buffer of its size, and
the process holds about that much less of the file resident after a completion), ``off`` and
``auto`` (lazy above 4 GiB only) read it whole; the greedy text is the same either way. The
log lines, the text and the resident drop are those of llama-server under the same flags,
--fit's projection included (its trial load gets the lazy mode, as llama-server's does)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import httpx
import pytest

from fixtures.tiny_gemma4 import PLE_BYTES, write_gemma4_model
from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, healthy_process

LINES = re.compile(r"(lazy read enabled|enabling prefetch for '.*'|model buffer size = .* MiB)")
PROMPT = {"prompt": "Hello there, how are", "n_predict": 8, "temperature": 0}


@pytest.fixture(scope="module")
def gemma4(tmp_path_factory: pytest.TempPathFactory, smollm_path: str) -> Path:
    out = tmp_path_factory.mktemp("tiny_gemma4")
    return write_gemma4_model(out / "gemma4.gguf", tokenizer_source=smollm_path)


def _rss_file_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"RssFile:\s+(\d+) kB", status).group(1))


def _run(cmd: list[str]) -> tuple[list[str], str, int]:
    """The lazy/buffer lines logged until healthy, the greedy text of one completion and
    the server's file-backed resident memory (KiB) after it."""
    with tempfile.NamedTemporaryFile("w+") as log:
        with healthy_process(cmd, log) as (proc, url):
            r = httpx.post(url + "/completion", json=PROMPT, timeout=120)
            assert r.status_code == 200, r.text
            rss = _rss_file_kib(proc.pid)
        text = Path(log.name).read_text()
    lines = [re.sub(r" +", " ", m.group(1)) for m in LINES.finditer(text)]
    return lines, r.json()["content"], rss


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc/PID/status")
@pytest.mark.flag_effect("--lazy-mode")
def test_lazy_mode_on_reads_per_layer_embeddings_on_demand_as_llama_server(
    gemma4: Path,
) -> None:
    peer = str(require_peer())
    common = ["-m", str(gemma4), "-c", "1024", "-np", "1", "-t", "2", "-v"]
    runs = {}
    for mode in ("on", "off", "auto"):
        flags = [*common, "--lazy-mode", mode]
        runs["ours", mode] = _run([*PYLLAMA_SERVER, *flags])
        runs["peer", mode] = _run([peer, *flags, "--no-webui"])

    for mode in ("on", "off", "auto"):  # the same log lines and text as llama-server
        assert runs["ours", mode][:2] == runs["peer", mode][:2], mode
    on, off, auto = (runs["ours", mode][0] for mode in ("on", "off", "auto"))
    mib = PLE_BYTES // 2**20
    assert f"model buffer size = {mib}.00 MiB" in on, on
    assert "lazy read enabled" in on and "enabling prefetch for 'per_layer_token_embd.weight'" in on
    assert off == auto and not any("lazy" in line or "prefetch" in line for line in off), off
    # the lazy line, the prefetch line, the lazy tensor's buffer in --fit's projection and
    # in the load (the projection placing the weights as the load does, as llama-server's)
    assert len(on) == len(off) + 4
    texts = {runs[side, mode][1] for side in ("ours", "peer") for mode in ("on", "off", "auto")}
    assert len(texts) == 1 and texts.pop()  # reading on demand changes no result

    # off faults the whole mapping in (MAP_POPULATE); on leaves the lazy tensor's pages out
    # but for the rows read: most of its 24 MiB stays out of the process, in both servers
    for side in ("ours", "peer"):
        drop_kib = runs[side, "off"][2] - runs[side, "on"][2]
        assert drop_kib > PLE_BYTES // 4 // 1024, (side, drop_kib)
