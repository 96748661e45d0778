"""pyllama-server: llama-server's REST API on Starlette, over the C++ engine.

``create_app`` and ``serve`` are imported on first use, so that ``pyllama-server`` can say
which extra is missing (``pip install 'pyllama-engine[server]'``) in one line instead of failing
inside this package's import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyllama.server.settings import Settings

if TYPE_CHECKING:
    from pyllama.server.app import create_app, serve

__all__ = ["Settings", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name in ("create_app", "serve"):
        from pyllama._extras import require

        require("server", f"pyllama.server.{name}")
        from pyllama.server import app

        return getattr(app, name)
    raise AttributeError(f"module 'pyllama.server' has no attribute {name!r}")
