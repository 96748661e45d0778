"""pyllama-server with a bare ASGI handler for ``POST /v1/embeddings`` in front of the app:
orjson in, tokenize, submit, ``TaskStream.rest()``, orjson out, with no Starlette
middleware, routing, ``Request``, pydantic model or ``Response``. Every other request goes
to the app as usual. It answers plain string inputs only (no validation, no errors in the
protocol's shape): a measuring tool, not a server.

What the framework's layers cost a one-text request, as bench_embeddings' second server
against the package as it is (the ratio is the package over this):

    printf '#!/bin/sh\\nexec python %s "$@"\\n' "$PWD/bare_embeddings_server.py" > /tmp/bare
    chmod +x /tmp/bare
    python bench_embeddings.py --llama-server /tmp/bare --concurrency 1,4 --batch 1
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

import pyllama.server.app as app_module
from pyllama import _core

_create_app = app_module.create_app


def create_app(*args: Any, **kwargs: Any) -> Any:
    app = _create_app(*args, **kwargs)
    state = app.state.pyllama

    async def embeddings(receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        inputs = orjson.loads(body)["input"]
        jobs = []
        for text in [inputs] if isinstance(inputs, str) else inputs:
            task = _core.TaskParams()
            task.kind = _core.TaskKind.EMBEDDING
            task.prompt = state.model.tokenize_prompt(text)
            task.embd_normalize = 2
            jobs.append(task)
        data = []
        for i, stream in enumerate(state.engine.submit_many(jobs)):
            events = await stream.rest()
            stream.close()
            data.append({"object": "embedding", "index": i, "embedding": events[-1].embedding})
        out = orjson.dumps({"object": "list", "model": state.model_name, "data": data})
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(out))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    async def bare(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/v1/embeddings"
        ):
            await embeddings(receive, send)
        else:
            await app(scope, receive, send)

    bare.state = app.state  # type: ignore[attr-defined]
    return bare


if __name__ == "__main__":
    app_module.create_app = create_app  # serve() builds its app through this name
    from pyllama.server.cli import main

    sys.argv = ["pyllama-server", *sys.argv[1:]]
    sys.exit(main())
