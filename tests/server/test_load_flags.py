"""The model-loading and context options act as in llama-server, read from the -v log of
both servers for the same command line: the tensors whose buffer type -ot, -ncffn and -otd
override (each model's load), CPU_REPACK's line (gone with --no-repack),
the model buffers (mapped unless --load-mode none), each context's size
and KV cache lines (--kv-unified-per-slot, the draft's -ctkd/-ctvd), --defrag-thold's
deprecation warning. With --fit off each model is loaded once: the model, then the draft.
The MoE options on a tiny mixture-of-experts model (tests/fixtures/tiny_moe.py): the expert
tensors of all layers (--cpu-moe) or of the first N (--n-cpu-moe), each also for the draft."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from fixtures.tiny_moe import write_moe_model
from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER, start_process, stop_process, wait_healthy

OVERRIDDEN = re.compile(r"tensor (\S+) \(.*\) buffer type overridden to (\S+)")
CONTEXT = re.compile(r"(llama_context: +n_ctx += .*|llama_kv_cache: +size = .*)")
REPACK = "preferred buffer type CPU_REPACK"
DEPRECATED = "DEPRECATED: --defrag-thold is deprecated and no longer necessary to specify"


def load_facts(cmd: list[str]) -> dict[str, object]:
    """What a server's -v log says of each model load, once it is healthy."""
    with tempfile.NamedTemporaryFile("w+") as log:
        proc, url = start_process(cmd, stdout=log)
        try:
            wait_healthy(url, proc)
        finally:
            stop_process(proc)
        text = Path(log.name).read_text()
    loads = text.split("llama_model_loader: Dumping metadata")[1:]
    return {
        "overridden": [sorted(set(OVERRIDDEN.findall(load))) for load in loads],
        "repack": [REPACK in load for load in loads],
        "buffers": [re.findall(r"load_tensors: +(\S+) model buffer size", load) for load in loads],
        "contexts": [re.sub(r" +", " ", m.group(1)) for m in CONTEXT.finditer(text)],
        "deprecated": DEPRECATED in text,
    }


@pytest.fixture(scope="module")
def model_and_draft(smollm_path: str) -> list[str]:
    return [*("-m", smollm_path, "-md", smollm_path, "--spec-type", "draft-simple")]


FLAGS = [
    *("-ot", r"blk\.5\.attn_k.*=CPU", "-ncffn", "1", "--no-repack", "--defrag-thold", "0.1"),
    *("-np", "2", "--kv-unified-per-slot", "512", "-ctkd", "q8_0", "-ctvd", "q4_0"),
    *("-otd", r"blk\.3\.attn_q.*=CPU", "--load-mode", "none"),
]


@pytest.mark.flag_effect(
    "--override-tensor", "--n-cpu-ffn", "--no-repack", "--defrag-thold", "--kv-unified-per-slot",
    "--cache-type-k-draft", "--cache-type-v-draft", "--override-tensor-draft", "--load-mode",
)  # fmt: skip
def test_loads_and_contexts_are_llama_servers(model_and_draft: list[str]) -> None:
    common = [*model_and_draft, "-t", "2", "-v", "--fit", "off", "--no-warmup"]
    ours = load_facts([*PYLLAMA_SERVER, *common, *FLAGS])
    theirs = load_facts([str(require_peer()), *common, *FLAGS, "--no-webui"])
    assert ours == theirs
    plain = load_facts([*PYLLAMA_SERVER, *common, "-np", "2"])
    assert plain["overridden"] == [[], []] and plain["repack"] == [True, True], plain
    assert not plain["deprecated"] and ours["deprecated"]
    main, draft = ours["overridden"]
    assert main == [
        *[(f"blk.0.ffn_{w}.weight", "CPU") for w in ("down", "gate", "up")],
        ("blk.5.attn_k.weight", "CPU"),
    ], main
    assert draft == [("blk.3.attn_q.weight", "CPU")], draft
    assert ours["repack"] == [False, False]
    assert plain["buffers"] == [["CPU_Mapped"]] * 2 and ours["buffers"] == [["CPU"]] * 2
    assert ours["contexts"] != plain["contexts"], ours["contexts"]
    assert any("n_ctx = 1024" in line for line in ours["contexts"]), ours["contexts"]
    assert any("K (q8_0)" in line and "V (q4_0)" in line for line in ours["contexts"])


WEIGHTS = ("gate", "up", "down")


def _experts(layers: range) -> list[tuple[str, str]]:
    return sorted((f"blk.{i}.ffn_{w}_exps.weight", "CPU") for i in layers for w in WEIGHTS)


MOE_CASES = {  # flags -> the experts kept in the CPU's buffers: the model's, the draft's
    "first layer, draft all": (["--n-cpu-moe", "1", "--cpu-moe-draft"], [range(1), range(2)]),
    "all, draft first layer": (["--cpu-moe", "--n-cpu-moe-draft", "1"], [range(2), range(1)]),
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            "first layer, draft all",
            marks=pytest.mark.flag_effect("--n-cpu-moe", "--cpu-moe-draft"),
        ),
        pytest.param(
            "all, draft first layer",
            marks=pytest.mark.flag_effect("--cpu-moe", "--n-cpu-moe-draft"),
        ),
    ],
)
def test_moe_experts_stay_on_the_cpu_as_llama_servers(
    smollm_path: str, tmp_path_factory: pytest.TempPathFactory, case: str
) -> None:
    moe = str(
        write_moe_model(tmp_path_factory.mktemp("moe") / "moe.gguf", tokenizer_source=smollm_path)
    )
    flags, layers = MOE_CASES[case]
    common = ["-m", moe, "-md", moe, "--spec-type", "draft-simple", "-c", "512", "-t", "2"]
    common += ["-v", "--fit", "off", "--no-warmup", *flags]
    ours = load_facts([*PYLLAMA_SERVER, *common])
    theirs = load_facts([str(require_peer()), *common, "--no-webui"])
    assert ours["overridden"] == theirs["overridden"] == [_experts(r) for r in layers], ours
