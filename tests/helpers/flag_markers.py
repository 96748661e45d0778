"""The tests that observe a llama-server option act: every ``pytest.mark.flag_effect(...)``
under tests/, read from the source (no import, no collection). A marker counts for the test
function it decorates, for the test whose ``parametrize`` list holds it (``pytest.param(...,
marks=...)``, also through a module-level list the decorator names), or, in a module-level
``pytestmark``, for every test of the module."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

__all__ = ["TESTS_DIR", "flag_effect_tests"]

TESTS_DIR = Path(__file__).resolve().parent.parent


def _spellings(node: ast.AST) -> list[str]:
    """The string arguments of each ``*.mark.flag_effect(...)`` call under ``node``."""
    out: list[str] = []
    for call in ast.walk(node):
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "flag_effect"
            and isinstance(call.func.value, ast.Attribute)
            and call.func.value.attr == "mark"
        ):
            for arg in call.args:
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    raise ValueError(f"flag_effect takes string literals: {ast.unparse(call)}")
                out.append(arg.value)
    return out


def _tests(body: list[ast.stmt], prefix: str = "", outer: tuple = ()) -> list[tuple[str, list]]:
    """(name, decorators) for each test function in ``body`` and in its Test* classes (a
    method also carries its class's decorators)."""
    out: list[tuple[str, list]] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test"):
                out.append((f"{prefix}{node.name}", [*outer, *node.decorator_list]))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            inner = (*outer, *node.decorator_list)
            out += _tests(node.body, f"{prefix}{node.name}::", inner)
    return out


def scan_module(path: Path, rel: str) -> dict[str, set[str]]:
    """spelling -> {"rel::test"} for one test module."""
    tree = ast.parse(path.read_text(), str(path))
    found: dict[str, set[str]] = defaultdict(set)
    named: dict[str, list[str]] = {}  # module-level name -> the spellings its value marks
    module_wide: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            marked = _spellings(node.value) if node.value is not None else []
            for target in targets:
                if isinstance(target, ast.Name) and marked:
                    if target.id == "pytestmark":
                        module_wide += marked
                    else:
                        named[target.id] = marked
    for name, decorators in _tests(tree.body):
        spellings = [s for d in decorators for s in _spellings(d)]
        for d in decorators:
            for sub in ast.walk(d):
                if isinstance(sub, ast.Name) and sub.id in named:
                    spellings += named[sub.id]
        for s in [*spellings, *module_wide]:
            found[s].add(f"{rel}::{name}")
    return found


def flag_effect_tests(root: Path = TESTS_DIR) -> dict[str, set[str]]:
    """spelling -> the tests (``tests/path.py::name``) whose flag_effect markers name it."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        if not path.name.startswith("test_"):
            continue
        rel = path.relative_to(root.parent).as_posix()
        for spelling, tests in scan_module(path, rel).items():
            found[spelling] |= tests
    return dict(found)
