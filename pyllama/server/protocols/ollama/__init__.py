"""Ollama's API: /api/chat and /api/generate (``routes``), /api/embed and /api/embeddings
(``embed``), the model endpoints /api/tags, /api/show, /api/ps, /api/version (``models``),
typed request bodies (``schemas``) and field translation both ways (``convert``)."""
