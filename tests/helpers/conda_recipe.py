"""Render a rattler-build recipe (``conda/recipe.yaml``) for one variant, as rattler-build
does before it solves anything: the ``context`` first, then ``${{ ... }}`` expressions and
``- if: / then: / else:`` list items everywhere. Enough of the format for pyllama's recipe;
rattler-build itself is not available here (no conda channel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml

__all__ = ["PLATFORMS", "render"]

# rattler-build's platform selectors, for the platforms the recipe is checked on
PLATFORMS: dict[str, dict[str, bool]] = {
    "linux-64": {"linux": True, "unix": True, "x86_64": True, "win": False, "osx": False},
    "linux-aarch64": {"linux": True, "unix": True, "x86_64": False, "win": False, "osx": False},
}

_ENV = jinja2.Environment(
    variable_start_string="${{",
    variable_end_string="}}",
    undefined=jinja2.StrictUndefined,  # a name the recipe uses but the variant lacks: error
    keep_trailing_newline=True,
)


def _value(text: str, scope: dict[str, Any]) -> Any:
    """A string as rattler-build reads it: a lone ``${{ expr }}`` keeps the value's type."""
    stripped = text.strip()
    if stripped.startswith("${{") and stripped.endswith("}}") and stripped.count("${{") == 1:
        return _ENV.compile_expression(stripped[3:-2].strip())(**scope)
    return _ENV.from_string(text).render(**scope)


def _walk(node: Any, scope: dict[str, Any]) -> Any:
    if isinstance(node, str):
        return _value(node, scope)
    if isinstance(node, dict):
        return {key: _walk(value, scope) for key, value in node.items()}
    if isinstance(node, list):
        out: list[Any] = []
        for item in node:
            if isinstance(item, dict) and "if" in item:
                chosen = (
                    item["then"]
                    if _ENV.compile_expression(item["if"])(**scope)
                    else item.get("else", [])
                )
                chosen = chosen if isinstance(chosen, list) else [chosen]
                out.extend(_walk(chosen, scope))
            else:
                out.append(_walk(item, scope))
        return out
    return node


def render(recipe: Path, variant: dict[str, str], platform: str = "linux-64") -> dict[str, Any]:
    """The recipe for one variant (``{"cuda_compiler_version": "12.9", "python": "3.11"}``)."""
    raw = yaml.safe_load(recipe.read_text())
    scope: dict[str, Any] = {
        **PLATFORMS[platform],
        **variant,
        "hash": "0000000",  # rattler-build's hash of the variant; any value renders
        "PYTHON": "$PYTHON",
        "compiler": lambda lang: f"{lang}_compiler_{platform}",
        "stdlib": lambda lang: f"{lang}_stdlib_{platform}",
    }
    for key, value in raw.pop("context", {}).items():
        scope[key] = _walk(value, scope)
    return _walk(raw, scope)
