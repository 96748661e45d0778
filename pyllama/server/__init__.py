"""pyllama-server: llama-server's REST API on Starlette, over the C++ engine."""

from __future__ import annotations

from pyllama.server.app import create_app, serve
from pyllama.server.settings import Settings

__all__ = ["Settings", "create_app", "serve"]
