"""The optional extras, the imports each one provides, and the one error for a missing one.

``pyproject.toml`` declares the extras; ``tests/test_dependencies.py`` checks that this table,
those declarations and every third-party import of the package agree. A feature that needs
an extra calls ``require`` where it starts, so a missing package is one line naming the extra
to install, not a ``ModuleNotFoundError`` from deep inside an import chain.
"""

from __future__ import annotations

import importlib.util

__all__ = ["DISTRIBUTION", "EXTRAS", "MissingExtraError", "missing", "require"]

# what pip installs (pyproject.toml's name); the import package is pyllama
DISTRIBUTION = "pyllama-engine"

# import names, which are also the distribution names of these packages
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("starlette", "uvicorn", "orjson", "pydantic", "anyio", "httpx"),
    "convert": ("gguf",),
    "ray": ("ray", "starlette", "pydantic", "gguf"),
}


class MissingExtraError(ImportError):
    """A feature's optional dependencies are not installed."""


def missing(extra: str) -> list[str]:
    """The packages of ``extra`` that cannot be imported here."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def require(extra: str, feature: str) -> None:
    """Raise ``MissingExtraError`` naming the extra when any of its packages is missing."""
    gone = missing(extra)
    if gone:
        raise MissingExtraError(
            f"{feature} needs {', '.join(gone)}, which the '{extra}' extra installs: "
            f"pip install '{DISTRIBUTION}[{extra}]'"
        )
