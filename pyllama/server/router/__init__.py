"""Router mode (``--models-dir``, ``--models-preset``): one front server, a child
``pyllama-server`` per loaded model. ``app`` is the front server and its proxy to the
children, ``table`` the models it knows and their children, ``discovery`` where models
come from, ``entry`` one model, ``queue`` the ``--models-max`` slots and the requests
waiting for one, ``events`` the /models/sse fan-out, ``download`` one ``POST /models``.

May import ``http``, ``settings``, ``tools`` and ``pyllama.hub``; only ``app.serve``
imports the router, and never a protocol or the pipeline (children serve those).
"""
