"""``/tools``: llama-server's built-in agent tools (``--tools``: files, search, edit, shell)
and MCP servers' tools (``mcp``), one registry (``registry``) behind the routes
(``routes``); the web UI's /cors-proxy (``proxy``). Where a tool's I/O runs: ``localio``
(this host) or an isolate (``isolate``, ``runtime``).

May import ``http``; never a protocol, the pipeline or the router.
"""
