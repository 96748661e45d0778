"""The package's shape stays what docs/architecture.md says: folders instead of name-prefix
families, files of one concern, a docstring on every package, and the server's layers
importing only downward (protocols -> pipeline -> http; the router only from the app)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from helpers.imports import imports

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pyllama"
SERVER = "pyllama.server"
MAX_LINES = 600
# server package -> the server packages it must not import (at any depth, lazily too)
FORBIDDEN = {
    "http": ("pipeline", "protocols", "router", "ops", "tools", "state", "app", "cli"),
    "pipeline": ("protocols", "router", "app", "cli"),
    "protocols": ("router", "app", "cli"),
    "ops": ("pipeline", "protocols", "router", "app", "cli"),
    "tools": ("pipeline", "protocols", "router", "app", "cli"),
    "router": ("pipeline", "protocols", "app", "cli", "state"),
}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_no_name_prefix_families():
    """``ollama_convert.py`` beside ``ollama.py`` is a folder that is missing."""
    found = []
    for folder in sorted({p.parent for p in PACKAGE.rglob("*.py")}):
        stems = [p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")]
        families = defaultdict(list)
        for stem in stems:
            families[stem.split("_")[0]].append(stem)
        found += [
            f"{folder.relative_to(ROOT)}: {sorted(members)}"
            for members in families.values()
            if len(members) > 1 and any("_" in m for m in members)
        ]
    assert not found


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "server").rglob("*.py")), ids=lambda p: _module(p)
)
def test_server_files_hold_one_concern(path: Path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{n} lines: split it by concern"


@pytest.mark.parametrize("init", sorted(PACKAGE.rglob("__init__.py")), ids=lambda p: _module(p))
def test_every_package_says_what_it_holds(init: Path):
    import ast

    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc and len(doc) > 40, f"{_module(init)} needs a docstring: what it holds and may import"


def _server_part(module: str) -> str | None:
    if not module.startswith(SERVER + "."):
        return None
    return module[len(SERVER) + 1 :].split(".")[0]


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_server_layers_import_downward(part: str):
    bad = []
    for path in sorted((PACKAGE / "server" / part).rglob("*.py")):
        for module, line, _ in imports(path, ROOT):
            target = _server_part(module)
            if target in FORBIDDEN[part]:
                bad.append(f"{_module(path)}:{line} imports {module}")
    assert not bad


def test_only_the_app_starts_the_router():
    users = {
        _module(path)
        for path in (PACKAGE / "server").rglob("*.py")
        if _server_part(_module(path)) != "router"
        for module, _, _ in imports(path, ROOT)
        if _server_part(module) == "router"
    }
    assert users == {"pyllama.server.app"}


def test_scale_out_builds_on_the_server_entry_points():
    """``pyllama.serve`` is a room above the server: it may use ``create_app`` and the flag
    parser (``pyllama.server.app``, ``.cli``), never the server's insides; the server never
    imports it."""
    allowed = {"pyllama.server.app", "pyllama.server.cli"}
    bad = []
    for path in sorted((PACKAGE / "serve").rglob("*.py")):
        for module, line, _ in imports(path, ROOT):
            if (module.startswith(SERVER + ".") and module not in allowed) or module == SERVER:
                bad.append(f"{_module(path)}:{line} imports {module}")
    for path in sorted((PACKAGE / "server").rglob("*.py")):
        for module, line, _ in imports(path, ROOT):
            if module == "pyllama.serve" or module.startswith("pyllama.serve."):
                bad.append(f"{_module(path)}:{line} imports {module}")
    assert not bad
