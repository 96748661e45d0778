"""``Llama.from_pretrained(repo_id, filename, additional_files=[...])`` on a local stand-in
for the hub: the model loads, and each additional file (a glob) lands in the same cache,
where an offline lookup finds it afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.fake_hub import FakeFile, FakeHub, FakeRepo

REPO = "test-org/pretrained-GGUF"


def test_additional_files_come_into_the_cache(smollm_path: str, tmp_path: Path) -> None:
    hub = FakeHub()
    model = Path(smollm_path).read_bytes()
    hub.repos[REPO] = FakeRepo(
        {"tiny-Q4_1.gguf": FakeFile(model), "mmproj-tiny-f16.gguf": FakeFile(b"GGUF" + b"\0" * 64)}
    )
    env = {**os.environ, "LLAMA_CACHE": str(tmp_path / "cache"), "HF_ENDPOINT": hub.url,
           "HF_TOKEN": "", "MODEL_ENDPOINT": ""}  # fmt: skip
    code = textwrap.dedent(
        f"""
        from pyllama import Llama, hub
        llm = Llama.from_pretrained(
            "{REPO}", "*Q4_1.gguf", additional_files=["mmproj-*.gguf"], verbose=False
        )
        print(llm.model_path)
        print(hub.download("{REPO}", filename="mmproj-*.gguf", offline=True))
        """
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True,
            cwd=tmp_path, timeout=300,
        )  # fmt: skip
    finally:
        hub.close()
    assert r.returncode == 0, r.stderr[-3000:]
    model_path, extra = (Path(line) for line in r.stdout.strip().splitlines()[-2:])
    assert model_path.name == "tiny-Q4_1.gguf" and model_path.read_bytes() == model
    assert extra.name == "mmproj-tiny-f16.gguf" and extra.parent == model_path.parent
