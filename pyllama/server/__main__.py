"""``python -m pyllama.server``: the same as ``pyllama-server``."""

from __future__ import annotations

import sys

from pyllama.server.cli import main

sys.exit(main())
