"""The README's first command as a new user meets it: the package installed into a clean
venv with nothing but ``[server]`` starts ``pyllama-server`` on the demo model (fetched
into an empty cache) and answers the README's client snippets; installed with no extra,
``import pyllama`` and the ``pyllama`` command work, and ``pyllama-server`` names the
extra to install.

One wheel serves both venvs. It is built from this checkout in the packaging tests'
build venv (``helpers.venvs.build_venv``) with the same build directory as ``pip install .``
(``build/{wheel_tag}``), so only the bindings are compiled again (seconds with ccache,
which ``.ci/run`` installs); llama.cpp is not. The venvs take
their dependencies from the package index, as a user's would: a dependency missing from
an extra fails here even though the test extras installed it in this environment.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.servers import free_port
from helpers.venvs import PIP, build_venv, new_venv, run_ok

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # in the build venv (one path across runs: ccache answers for the bindings) rather
    # than pip's isolated one (pybind11 at a new temporary path each time)
    python = build_venv() / "python"
    cmd = [str(python), *PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out)]
    run_ok([*cmd, str(ROOT)], timeout=1800)
    (built,) = out.glob("pyllama_engine-*.whl")
    return built


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The new user's directory, where the commands run (not the checkout, whose source
    tree would shadow the installed package)."""
    return tmp_path_factory.mktemp("user")


@pytest.fixture(scope="module")
def user_env(home: Path) -> dict[str, str]:
    """The environment without this test run's Python settings, and an empty model cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return {**env, "PYLLAMA_CACHE": str(home / "cache")}


@pytest.fixture(scope="module")
def server_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # as on a user's machine without a compiler: the wheel and its dependencies install
    # from binaries alone
    return new_venv(tmp_path_factory.mktemp("venv-server"), f"{wheel}[server]", no_compiler=True)


@pytest.fixture(scope="module")
def base_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return new_venv(tmp_path_factory.mktemp("venv-base"), str(wheel))


@pytest.fixture(scope="module")
def served(server_venv: Path, user_env: dict[str, str], home: Path) -> Iterator[str]:
    """``pyllama-server`` as the README starts it (no flags; a free port instead of 8080)."""
    port = free_port()
    log = home / "server.log"
    with (
        log.open("w") as out,
        subprocess.Popen(
            [str(server_venv / "pyllama-server"), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=home,
            env=user_env,
        ) as proc,
    ):
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(3000):  # fetches the demo model first: up to 5 minutes
                if proc.poll() is not None:
                    pytest.fail(f"pyllama-server exited {proc.returncode}:\n{log.read_text()}")
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            else:
                pytest.fail(f"pyllama-server never became healthy:\n{log.read_text()}")
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_the_wheel_carries_the_license_texts(wheel: Path):
    """pyllama's own MIT text in the .dist-info, and the texts of the MIT code compiled into
    its libraries: llama.cpp/ggml and what llama-common embeds."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        ours = [n for n in names if ".dist-info/" in n and n.endswith("/LICENSE")]
        assert ours, names
        for part in ("llama.cpp", "nlohmann-json", "cpp-httplib"):
            text = z.read(f"pyllama/licenses/{part}.LICENSE").decode()
            assert "MIT License" in text and "Permission is hereby granted" in text, part
        for part in ("xxhash", "sha256", "rotate-bits"):  # in libmtmd
            assert f"pyllama/licenses/{part}.LICENSE" in names, part


def test_the_wheel_carries_the_chat_page(wheel: Path):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    page = {f"pyllama/webui/{p.name}" for p in (ROOT / "pyllama" / "webui").iterdir()}
    assert "pyllama/webui/index.html" in page
    assert sorted(page - names) == []


def test_the_installed_server_serves_the_chat_page(served: str):
    page = httpx.get(served + "/", headers={"Accept": "text/html"})
    assert page.status_code == 200 and '<script type="module"' in page.text
    assert httpx.get(served + "/webui/main.js").status_code == 200
    assert httpx.get(served + "/").text == "Ollama is running"  # other clients


def test_the_server_extra_alone_serves_the_demo_model(served: str):
    r = httpx.post(
        served + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 8},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] > 0


def test_the_public_server_imports_work_from_the_wheel(server_venv: Path, home: Path):
    code = (
        "import pyllama.server\n"
        "from pyllama.server import Settings, create_app\n"
        "print(type(create_app(Settings(model='unused.gguf'))).__name__)"
    )
    r = run_ok([str(server_venv / "python"), "-c", code], cwd=home)
    assert r.stdout.strip() == "Starlette"


CLIENT_BLOCKS = [  # OpenAI, Anthropic and Ollama, Responses
    b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "http://127.0.0.1:8080" in b
]


@pytest.mark.parametrize(
    "block", CLIENT_BLOCKS, ids=[f"block{i}" for i in range(len(CLIENT_BLOCKS))]
)
def test_the_readme_client_snippets_answer_it(served: str, block: str, capsys):
    exec(compile(block.replace("http://127.0.0.1:8080", served), "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()


def test_no_extra_imports_and_generates(base_venv: Path, user_env: dict[str, str], home: Path):
    py = str(base_venv / "python")
    r = run_ok([py, "-c", "import pyllama; print(pyllama.__version__)"], cwd=home)
    assert r.stdout.strip()
    r = run_ok(
        [str(base_venv / "pyllama"), "-n", "4", "The capital of France is"],
        cwd=home,
        env=user_env,
        timeout=600,
    )
    assert r.stdout.startswith("The capital of France is") and len(r.stdout) > 26


def test_no_extra_server_names_the_extra(base_venv: Path, user_env: dict[str, str], home: Path):
    r = subprocess.run(
        [str(base_venv / "pyllama-server")],
        capture_output=True,
        text=True,
        cwd=home,
        env=user_env,
        timeout=120,
    )
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "pyllama-server: pyllama-server needs starlette, uvicorn, orjson, pydantic, anyio, httpx, "
        "which the 'server' extra installs: pip install 'pyllama-engine[server]'"
    ]


def test_no_extra_converter_names_the_extra(base_venv: Path, user_env: dict[str, str], home: Path):
    r = subprocess.run(
        [str(base_venv / "python"), "-m", "pyllama.convert_bert", "model-dir", "out.gguf"],
        capture_output=True,
        text=True,
        cwd=home,
        timeout=120,
    )
    assert r.returncode == 1
    assert "pip install 'pyllama-engine[convert]'" in r.stderr and "Traceback" not in r.stderr
