"""Placeholder: routes being written (issue 5)."""

from typing import Any

ROUTES: list[tuple[str, Any, list[str]]] = []
