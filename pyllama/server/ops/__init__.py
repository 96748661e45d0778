"""Operating a running server: /metrics's counters (``metrics``), slot save/restore and
/lora-adapters (``admin``), and freeing the model when idle (``sleep``).

May import ``http`` and ``state``; never a protocol, the pipeline or the router.
"""
