"""llama-cpp-python's own test suite (the ``tests/`` of its pinned sdist, which
ci/fetch_vendor.py caches), run by a Python on one side: ``pyllama`` (``import llama_cpp``
aliased to pyllama.compat.llama_cpp) or ``llama-cpp-python`` (the real package, in a venv
from benchmarks/llama_cpp_python_venv.sh). The hub models become local files on both
sides (``tests/llama_cpp_api/lcp_suite/huggingface_hub.py``). Prints {test: outcome} as
JSON::

    python tests/helpers/lcp_suite.py PYTHON SIDE DEMO_MODEL EMBEDDING_MODEL
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "llama_cpp_api" / "lcp_suite"
VERSION = "0.3.36"

# the suite's hub models -> which local model stands in ("demo" / "embedding"); those with
# none here (a recurrent and a hybrid model) fail on both sides
STAND_INS = {
    "lmstudio-community/Qwen3.5-0.8B-GGUF/Qwen3.5-0.8B-Q8_0.gguf": "demo",
    "ggml-org/models/tinyllamas/stories15M-q4_0.gguf": "demo",
    "CompendiumLabs/bge-small-en-v1.5-gguf/bge-small-en-v1.5-q4_k_m.gguf": "embedding",
}


def sdist() -> Path:
    out = subprocess.run(
        [sys.executable, str(ROOT / "ci" / "fetch_vendor.py"), "--print-sdist"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(out.stdout.strip())


def run(python: str, side: str, demo: str, embedding: str, timeout: float = 1500) -> dict[str, str]:
    """Each test's outcome: passed, failed, error or skipped."""
    with tempfile.TemporaryDirectory(prefix="lcp-suite-") as tmp:
        work = Path(tmp)
        prefix = f"llama_cpp_python-{VERSION}/tests/"
        with tarfile.open(sdist()) as tar:
            for member in tar.getmembers():
                if member.name.startswith(prefix) and member.isfile():
                    target = work / "tests" / member.name[len(prefix) :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    assert source is not None
                    target.write_bytes(source.read())
        for name in ("conftest.py", "huggingface_hub.py"):
            shutil.copy(HERE / name, work / name)
        (work / "pytest.ini").write_text("[pytest]\n")
        # the suite opens ./vendor/llama.cpp/models/... from its working directory; that
        # directory is not the source tree, whose pyllama/ (no compiled module) would shadow
        # the installed one
        (work / "vendor").symlink_to(ROOT / "vendor", target_is_directory=True)
        local = {"demo": demo, "embedding": embedding}
        env = {
            **os.environ,
            "LCP_SUITE_SIDE": side,
            "LCP_SUITE_MODELS": json.dumps({k: local[v] for k, v in STAND_INS.items()}),
            # the stand-in huggingface_hub first
            "PYTHONPATH": os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")])),
        }
        report = work / "report.xml"
        proc = subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(work / "pytest.ini"),
             "--rootdir", str(work), f"--junitxml={report}", str(work / "tests")],
            cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if not report.is_file():
            raise RuntimeError(
                f"the suite did not run:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return outcomes(report)


def outcomes(report: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = (
            "failed" if "failure" in kinds
            else "error" if "error" in kinds
            else "skipped" if "skipped" in kinds
            else "passed"
        )  # fmt: skip
    return out


if __name__ == "__main__":
    python, side, demo, embedding = sys.argv[1:5]
    print(json.dumps(run(python, side, demo, embedding), indent=1, sort_keys=True))
