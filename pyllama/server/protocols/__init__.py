"""One subpackage or module per wire protocol, each translating its requests into the
pipeline's calls and the pipeline's results back into its own shapes, beside its routes:
``openai`` (/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models), ``native``
(llama-server's own /completion, /infill, /rerank, /tokenize, /props ...), ``anthropic``
(/v1/messages), ``responses`` (/v1/responses), ``ollama`` (/api/*) and ``gcp`` (Vertex
AI's /predict, which dispatches to the others).

A protocol imports ``pipeline``, ``http`` and ``state``; never the router or the app.
OpenAI's routes reuse ``native``'s result object (llama-server's ``__verbose``), and
``gcp`` calls the app's routes, nothing else crosses between protocols.
"""
