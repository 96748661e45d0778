"""What a Python source file imports, read from its syntax tree (nothing is executed)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

__all__ = ["imports"]


def imports(path: Path, root: Path) -> Iterator[tuple[str, int, bool]]:
    """(absolute module name, line, at module level) for every import in ``path``, a file
    under ``root`` (which relative imports are resolved against)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(root).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module, node.lineno, id(node) in top_level
