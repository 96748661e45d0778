"""The compat layer (llama-cpp-python's API, ``pyllama/compat/``) is built on the core, never
the reverse: no module outside it imports it, statically or at run time."""

from __future__ import annotations

import ast
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pyllama"


def _run(code: str) -> str:
    # away from the checkout, whose source tree (no compiled _core) would shadow the install
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir()
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("pyllama.compat")  # importlib.import_module("...")
        ):
            names.add(node.value)
    return names


def test_no_core_module_imports_compat() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "compat":
            continue
        found = {n for n in _imports(ast.parse(path.read_text())) if n.startswith("pyllama.compat")}
        offenders += [f"{rel}: {n}" for n in sorted(found)]
    assert offenders == []


def test_the_core_and_the_server_load_without_compat() -> None:
    code = (
        "import sys, pyllama, pyllama.llama, pyllama.server.app, pyllama.engine\n"
        "print(sorted(m for m in sys.modules if m.startswith('pyllama.compat')))"
    )
    assert _run(code).strip() == "[]"


def test_a_compat_format_names_where_it_lives(smollm_path: str) -> None:
    """``pyllama.Llama(chat_format=...)`` with one of llama-cpp-python's own formats, the
    compat layer not imported: a ValueError saying how to get it."""
    code = (
        "import pyllama\n"
        f"try:\n    pyllama.Llama({smollm_path!r}, chat_format='alpaca', verbose=False)\n"
        "except ValueError as e:\n    print(e)\n"
    )
    out = _run(code)
    assert "once pyllama.compat.llama_cpp is imported" in out, out
