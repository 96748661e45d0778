"""Every third-party import of the package is declared by the part of it that imports it.

The package has three parts: the base (``import pyllama``, the ``pyllama`` command), the
server (``pyllama/server/``, installed with ``[server]``) and the GGUF converter
(``[convert]``); the tests are a fourth, installed with ``[test]``. A module may import what the base declares plus what its own extra
declares, and may import another part's modules only inside a function (where that feature
starts, behind ``pyllama._extras.require``). ``tests/package/test_install.py`` proves the same
from the other side, by installing the wheel with nothing but an extra.

This test reads ``pyproject.toml`` and maps import names to distributions through the
packages installed here (the test extras install every one the package imports).
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import sysconfig
from functools import cache
from pathlib import Path

import pytest

from pyllama._extras import DISTRIBUTION, EXTRAS

from helpers.imports import imports

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the test extras install tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pyllama"
BASE = ""  # the part every other part may use
# modules outside the base, by path prefix (the longest match wins)
PARTS = {
    "tests/": "test",
    "pyllama/server/": "server",
    "pyllama/hub/": "server",  # the hub client (httpx): the server downloads with it
    "pyllama/convert_bert.py": "convert",
    "pyllama/serve/": "ray",
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@cache
def _declared() -> dict[str, frozenset[str]]:
    """part -> the distributions it may import (its own and the base's)."""
    project = _project()
    extras: dict[str, list[str]] = project["optional-dependencies"]

    def names(requirements: list[str], seen: frozenset[str] = frozenset()) -> set[str]:
        out: set[str] = set()
        for req in requirements:
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?", req)
            assert m, req
            name = _normalize(m[1])
            if name == DISTRIBUTION:  # pyllama-engine[server] inside another extra
                for extra in (m[2] or "").split(","):
                    if extra.strip() not in seen:
                        out |= names(extras[extra.strip()], seen | {extra.strip()})
            else:
                out.add(name)
        return out

    base = names(project["dependencies"])
    parts = {BASE: frozenset(base)}
    for extra, reqs in extras.items():
        parts[extra] = frozenset(base | names(reqs, frozenset({extra})))
    return parts


@cache
def _distributions_of() -> dict[str, frozenset[str]]:
    """import name -> the installed distributions that provide it."""
    found: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        top = (dist.read_text("top_level.txt") or "").split()
        top += [f.parts[0].removesuffix(".py") for f in dist.files or () if len(f.parts) >= 1]
        dist_name = _normalize(dist.metadata["Name"])  # parses METADATA: once, not a file
        for name in set(top):
            if name.isidentifier():
                found.setdefault(name, set()).add(dist_name)
    return {k: frozenset(v) for k, v in found.items()}


def _is_stdlib(name: str) -> bool:
    names = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return name in names or name == "__future__"
    stdlib = Path(sysconfig.get_paths()["stdlib"])  # pragma: no cover - Python 3.9
    return (
        any((stdlib / f"{name}{ext}").exists() for ext in ("", ".py"))
        or name in sys.builtin_module_names
    )


def _part(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    matches = [prefix for prefix in PARTS if rel.startswith(prefix)]
    return PARTS[max(matches, key=len)] if matches else BASE


def _internal_target(module: str) -> Path | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        stem = ROOT.joinpath(*parts[:n])
        for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


MODULES = sorted(PACKAGE.rglob("*.py"))
TESTS = ROOT / "tests"
TEST_HELPERS = {
    "conftest",
    "helpers",
    "fixtures",
}  # importable from every test (tests/ on sys.path)


@pytest.mark.parametrize(
    "path", [*MODULES, *sorted(TESTS.rglob("*.py"))], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_every_import_is_declared_by_its_part(path: Path):
    part = _part(path)
    allowed = _declared()[part]
    dists = _distributions_of()
    problems = []
    for module, line, top in imports(path, ROOT):
        name = module.split(".")[0]
        if name == "pyllama":
            target = _internal_target(module)
            covered = target is None or _declared()[_part(target)] <= allowed
            if top and not covered:
                problems.append(
                    f"line {line}: imports {module} ({_part(target)} part) at module level"  # type: ignore[arg-type]
                )
            continue
        if _is_stdlib(name) or (part == "test" and name in TEST_HELPERS):
            continue
        provided = dists.get(name)
        if not provided and _normalize(name) in allowed:
            continue  # declared for other Pythons only (tomli), so not installed here
        if not provided:
            problems.append(f"line {line}: {name} is not installed here, so nothing declares it")
        elif not provided & allowed:
            extra = part or "base dependencies"
            problems.append(
                f"line {line}: {name} ({', '.join(sorted(provided))}) is not in {extra}"
            )
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_extras_table_matches_pyproject(extra: str):
    """``_extras.EXTRAS`` (what ``require`` checks) names exactly the declared packages of the
    extra that the package imports."""
    own = _declared()[extra] - _declared()[BASE]
    imported = {
        module.split(".")[0]
        for path in MODULES
        if _part(path) == extra
        for module, _, _ in imports(path, ROOT)
    }
    wanted = {name for name in imported if _distributions_of().get(name, frozenset()) & own}
    assert set(EXTRAS[extra]) == wanted


def test_the_distribution_name_is_the_one_the_errors_name():
    """``require``'s line says ``pip install 'DISTRIBUTION[extra]'``: the name pip knows."""
    assert _project()["name"] == DISTRIBUTION
    assert _normalize(DISTRIBUTION) not in ("pyllama", "pyllama-server")  # unrelated projects
