"""HTTP plumbing shared by every route: request bodies and their bounds, the error envelopes,
API keys, CORS, response header casing, listening sockets and SSE framing.

Imports only the standard library, Starlette, pydantic and orjson: everything else in the
server may import it, and it imports nothing of the server.
"""
