"""The serving context reserves what llama-server's does: the rows of logits a step may ask
for (``n_outputs_max``: one per slot, every token when embedding) and so the same compute
buffer, in --fit's projection too. Compared with llama-server's own -v log lines."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, healthy_process

LINES = re.compile(r"(n_outputs_max(?:_per_seq)? += \d+|\w+ +compute buffer size += +[\d.]+ MiB)")


def startup_lines(cmd: list[str]) -> list[str]:
    """The buffer lines a server logs until it is healthy (its --fit dry run included)."""
    with tempfile.NamedTemporaryFile("w+") as log:
        with healthy_process(cmd, log):
            pass
        text = Path(log.name).read_text()
    return [re.sub(r" +", " ", m.group(1)) for m in LINES.finditer(text)]


@pytest.mark.parametrize(
    "flags",
    # for embeddings llama-server lowers n_batch to n_ubatch (pyllama keeps it: an input may
    # span ubatches on a causal model) and pyllama unifies the KV cache: both given, the same
    [["-np", "3"], ["-np", "2", "--embedding", "-b", "512", "-kvu"]],
    ids=["completions", "embeddings"],
)
@pytest.mark.flag_effect("--parallel", "--embedding", "--verbose")
def test_output_rows_and_compute_buffer_match_llama_server(
    smollm_path: str, flags: list[str]
) -> None:
    common = ["-m", smollm_path, "-t", "2", "-c", "2048", "-v", *flags]
    ours = startup_lines([*PYLLAMA_SERVER, *common])
    theirs = startup_lines([str(require_peer()), *common, "--no-webui"])
    assert any("n_outputs_max" in line for line in ours), ours
    assert ours == theirs
