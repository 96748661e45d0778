"""Operating a running server: /metrics's counters and gauges (``metrics``) and request
latency histograms (``latency``), slot save/restore and
/lora-adapters (``admin``), and freeing the model when idle (``sleep``).

May import ``http`` and ``state``; never a protocol, the pipeline or the router.
"""
