"""The Vulkan plugin's presence for the tests that run on it (lavapipe, Mesa's Vulkan device
made of CPU cores): ``requires_vulkan`` skips them with the reason it is missing, and where
``PYLLAMA_REQUIRE_PLUGINS`` names vulkan (CI, which builds the plugin first) its absence is
an error instead."""

from __future__ import annotations

import os

import pytest

from pyllama.plugins import plugins

_vulkan = next((p for p in plugins() if p.name == "vulkan"), None)
MISSING = (
    "the Vulkan plugin is not installed (pip install ./plugins/vulkan)"
    if _vulkan is None
    else _vulkan.error
)
if MISSING and "vulkan" in os.environ.get("PYLLAMA_REQUIRE_PLUGINS", "").split(","):
    raise RuntimeError(f"PYLLAMA_REQUIRE_PLUGINS=vulkan: {MISSING}")

requires_vulkan = pytest.mark.skipif(bool(MISSING), reason=MISSING or "")
