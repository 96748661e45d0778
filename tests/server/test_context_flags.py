"""The context options reach llama.cpp's context as they do in llama-server: the lines
``llama_context`` and ``llama_kv_cache`` log with -v (sizes, batch sizes, flash attention,
the unified KV cache, RoPE frequencies, cache types) are llama-server's own for the same
command line, and not the defaults'."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy

LINE = re.compile(
    r"(llama_context: +(?:n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch|flash_attn|kv_unified"
    r"|freq_base|freq_scale) += .*|llama_kv_cache: +size = .*)"
)


def context_lines(cmd: list[str]) -> list[str]:
    """The context's lines from a server's -v log, once healthy: the last context made
    (the real one; --fit's projection comes before it)."""
    with tempfile.NamedTemporaryFile("w+") as log:
        proc, url = start_process(cmd, stdout=log)
        try:
            wait_healthy(url, proc)
        finally:
            stop_process(proc)
        text = Path(log.name).read_text()
    lines = [re.sub(r" +", " ", m.group(1)) for m in LINE.finditer(text)]
    start = max(i for i, line in enumerate(lines) if "n_seq_max" in line)
    return lines[start:]


FLAGS = {
    "quantized": [
        *("-c", "1536", "-np", "3", "-b", "256", "-ub", "128", "-fa", "on", "-kvu"),
        *("-ctk", "q8_0", "-ctv", "q8_0", "--rope-scale", "2", "--rope-freq-base", "20000"),
    ],
    "split": [
        *("-c", "1024", "-np", "2", "-fa", "off", "-no-kvu", "-ctk", "q4_0"),
        *("--rope-freq-scale", "0.25"),
    ],
}
SEEN = {  # what each case's lines must say (defaults would say otherwise)
    "quantized": [
        "n_ctx = 1536", "n_seq_max = 3", "n_batch = 256", "n_ubatch = 128",
        "flash_attn = enabled", "kv_unified = true", "freq_base = 20000.0", "freq_scale = 0.5",
        "K (q8_0)", "V (q8_0)",
    ],
    "split": [
        "n_ctx_seq = 512", "flash_attn = disabled", "kv_unified = false", "freq_scale = 0.25",
        "K (q4_0)", "V (f16)",
    ],
}  # fmt: skip


@pytest.mark.parametrize("case", list(FLAGS))
@pytest.mark.flag_effect(
    "--ctx-size", "--parallel", "--batch-size", "--ubatch-size", "--flash-attn", "--kv-unified",
    "--cache-type-k", "--cache-type-v", "--rope-scale", "--rope-freq-base", "--rope-freq-scale",
)  # fmt: skip
def test_the_context_is_llama_servers(smollm_path: str, case: str) -> None:
    common = ["-m", smollm_path, "-t", "2", "-v", *FLAGS[case]]
    ours = context_lines([*PYLLAMA_SERVER, *common])
    theirs = context_lines([str(require_peer()), *common, "--no-webui"])
    assert ours == theirs
    for seen in SEEN[case]:
        assert any(seen in line for line in ours), (seen, ours)
