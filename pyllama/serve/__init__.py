"""Scale-out: pyllama replicas run by existing engines (Ray Serve), routed by prompt prefix.

A room of its own above the server: each replica is ``pyllama.server.create_app`` driven
in-process (``inproc``), and nothing here is a second server. ``prefix`` turns a request body
of any protocol into chained block hashes of its prompt; ``affinity`` remembers which replica
served which blocks; ``rayserve`` holds the Ray Serve deployments and request router.
May import ``pyllama.server.app`` and ``pyllama.server.cli`` (the public entry points), never
the server's internals; the server never imports this package. Kubernetes and KServe
manifests live in ``deploy/``.
"""
