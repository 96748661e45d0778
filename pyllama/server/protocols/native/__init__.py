"""llama-server's own endpoints: /completion, /tokenize, /detokenize, /apply-template,
/props, /health, /slots, /metrics (``routes``), /infill (``infill``) and /rerank
(``rerank``), with their request schemas (``schemas``)."""
