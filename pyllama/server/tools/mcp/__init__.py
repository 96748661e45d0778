"""MCP servers over stdio for /tools: their definitions (``config``, Cursor's
``{"mcpServers": ...}`` format) and the client that runs and calls them (``client``)."""
