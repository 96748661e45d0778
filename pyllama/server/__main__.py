"""``python -m pyllama.server``: the same as ``pyllama-server``."""

from __future__ import annotations

import sys

from pyllama.server.cli import main

if __name__ == "__main__":  # importing it (an API doc tool walking the package) runs nothing
    sys.exit(main())
