"""pyllama on Ray Serve: ``serve run pyllama.serve.rayserve:build_app model=... replicas=2``.

``app`` builds the application from its arguments (``ServeArgs``): an HTTP ingress
(``ingress``) in front of N model replicas (``replica``), each a whole pyllama server driven
in-process, routed by ``router.PrefixAffinityRouter`` (prompt prefix, then load) or by Ray's
default router. Imports ray (the ``ray`` extra) and pyllama.server's public entry points.
"""

from pyllama._extras import require

require("ray", "pyllama on Ray Serve")  # one line naming the extra, not a deep ImportError

from pyllama.serve.rayserve.app import ServeArgs, build_app  # noqa: E402

__all__ = ["ServeArgs", "build_app"]
