"""pyllama.serve.inproc: an ASGI app driven in this process, without a socket (what a Ray
Serve replica does with ``create_app``): its lifespan, and one HTTP request at a time, streamed
part by part, a client that goes away mid-stream freeing its slot.

pytest-asyncio is not a dependency: each test runs its own event loop with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from pyllama.serve.inproc import Forwarded, Lifespan, ResponseStart, call
from pyllama.server.app import create_app
from pyllama.server.cli import parse_args

JSON = [(b"content-type", b"application/json")]


async def _fetch(app: Any, req: Forwarded) -> tuple[ResponseStart, list[bytes]]:
    """The ResponseStart and the body's parts, checking their order and types."""
    parts = [part async for part in call(app, req)]
    assert parts, "no response"
    start, *body = parts
    assert isinstance(start, ResponseStart), parts
    assert all(isinstance(p, bytes) for p in body), parts
    return start, body


def _post(path: str, body: Any, headers: list[tuple[bytes, bytes]] = JSON) -> Forwarded:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Forwarded("POST", path, headers=list(headers), body=raw)


def _header(start: ResponseStart, name: bytes) -> str:
    return next((v.decode() for k, v in start.headers if k.lower() == name), "")


async def _wait_healthy(app: Any, timeout: float = 60.0) -> list[bytes]:
    deadline = time.monotonic() + timeout
    while True:
        start, body = await _fetch(app, Forwarded("GET", "/health"))
        if start.status == 200:
            return body
        assert start.status == 503, (start, body)  # loading
        assert time.monotonic() < deadline, "the model never loaded"
        await asyncio.sleep(0.05)


def _with_server(
    model: str, test: Callable[[Any], Awaitable[Any]], *flags: str, healthy: bool = True
) -> Any:
    """Run ``test(app)`` on a fresh event loop with create_app's lifespan started."""

    async def main() -> Any:
        app = create_app(parse_args(["-m", model, "-t", "1", "-c", "1024", *flags]))
        lifespan = Lifespan(app)
        await lifespan.start()
        try:
            if healthy:
                await _wait_healthy(app)
            return await test(app)
        finally:
            await lifespan.stop()

    return asyncio.run(main())


# ---------------------------------------------------------------- with the model


def test_health_becomes_200(smollm_path: str):
    async def test(app: Any) -> None:
        body = await _wait_healthy(app)
        assert json.loads(b"".join(body)) == {"status": "ok"}

    _with_server(smollm_path, test, healthy=False)


def test_chat_completion(smollm_path: str):
    async def test(app: Any) -> None:
        chat = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8}
        start, body = await _fetch(app, _post("/v1/chat/completions", chat))
        assert start.status == 200
        assert _header(start, b"content-type").startswith("application/json")
        answer = json.loads(b"".join(body))
        assert answer["object"] == "chat.completion"
        assert isinstance(answer["choices"][0]["message"]["content"], str)
        assert 0 < answer["usage"]["completion_tokens"] <= 8

    _with_server(smollm_path, test)


def test_chat_completion_streamed(smollm_path: str):
    async def test(app: Any) -> None:
        chat = {"messages": [{"role": "user", "content": "Count."}], "max_tokens": 10}
        chat |= {"ignore_eos": True, "temperature": 0}  # tokens past an end token carry no text
        start, body = await _fetch(app, _post("/v1/chat/completions", {**chat, "stream": True}))
        assert start.status == 200
        assert _header(start, b"content-type").startswith("text/event-stream")
        # each event comes as its own part, as the app sent it: one SSE event a part
        assert len(body) >= 4, body  # the role chunk, content, the finish, [DONE]
        assert all(p.startswith(b"data: ") and p.endswith(b"\n\n") for p in body), body
        assert all(p.count(b"\n\n") == 1 for p in body), body
        assert body[-1] == b"data: [DONE]\n\n"
        chunks = [json.loads(p[len(b"data: ") :]) for p in body[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert text

    _with_server(smollm_path, test)


def test_bad_json_is_a_400_in_the_openai_envelope(smollm_path: str):
    async def test(app: Any) -> None:
        start, body = await _fetch(app, _post("/v1/chat/completions", b'{"messages": ['))
        assert start.status == 400
        error = json.loads(b"".join(body))["error"]
        assert error["code"] == 400
        assert error["type"] == "invalid_request_error"
        assert "JSON" in error["message"]

    _with_server(smollm_path, test)


def test_headers_reach_the_app(smollm_path: str):
    async def test(app: Any) -> None:
        assert (await _fetch(app, Forwarded("GET", "/slots")))[0].status == 401
        auth = Forwarded("GET", "/slots", headers=[(b"authorization", b"Bearer sesame")])
        start, body = await _fetch(app, auth)
        assert start.status == 200
        assert len(json.loads(b"".join(body))) >= 1

    _with_server(smollm_path, test, "--api-key", "sesame")


async def _processing(app: Any) -> int:
    start, body = await _fetch(app, Forwarded("GET", "/slots"))
    assert start.status == 200
    return sum(bool(slot["is_processing"]) for slot in json.loads(b"".join(body)))


def test_closing_mid_stream_frees_the_slot(smollm_path: str):
    async def test(app: Any) -> None:
        assert await _processing(app) == 0
        chat = {
            "messages": [{"role": "user", "content": "Tell me a long story."}],
            "max_tokens": 800,
            "ignore_eos": True,
            "stream": True,
        }
        parts = call(app, _post("/v1/chat/completions", chat))
        start = await parts.__anext__()
        assert isinstance(start, ResponseStart) and start.status == 200
        for _ in range(3):
            assert (await parts.__anext__()).startswith(b"data: ")
        assert await _processing(app) == 1  # generating, and far from done
        await parts.aclose()  # the client went away
        deadline = time.monotonic() + 5
        while await _processing(app):
            assert time.monotonic() < deadline, "the slot is still processing"
            await asyncio.sleep(0.05)
        # and the server goes on answering
        short = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        assert (await _fetch(app, _post("/v1/chat/completions", short)))[0].status == 200

    _with_server(smollm_path, test)


# ---------------------------------------------------------------- with small Starlette apps


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse(
        {
            "method": request.method,
            "path": request.url.path,
            "query": dict(request.query_params),
            "header": request.headers.get("x-test"),
            "body": (await request.body()).decode(),
            "client": list(request.client) if request.client else None,
        },
        headers={"x-echo": "yes"},
    )


def test_call_passes_the_whole_request():
    app = Starlette(routes=[Route("/echo/{rest:path}", _echo, methods=["GET", "POST", "PUT"])])
    req = Forwarded(
        "PUT",
        "/echo/a/b",
        query_string=b"x=1&y=two",
        headers=[(b"x-test", b"value")],
        body=b"payload \xc3\xa9",
        client=("10.0.0.7", 4242),
    )

    async def main() -> None:
        start, body = await _fetch(app, req)
        assert start.status == 200
        assert _header(start, b"x-echo") == "yes"
        assert json.loads(b"".join(body)) == {
            "method": "PUT",
            "path": "/echo/a/b",
            "query": {"x": "1", "y": "two"},
            "header": "value",
            "body": "payload é",
            "client": ["10.0.0.7", 4242],
        }
        start, _ = await _fetch(app, Forwarded("GET", "/nowhere"))
        assert start.status == 404

    asyncio.run(main())


def test_closing_early_cancels_the_app():
    state: dict[str, asyncio.Event] = {}

    async def forever(request: Request) -> StreamingResponse:
        async def gen():
            try:
                i = 0
                while True:
                    yield f"part {i}\n".encode()
                    i += 1
                    await asyncio.sleep(0.01)
            finally:
                state["ended"].set()

        return StreamingResponse(gen(), media_type="text/plain")

    app = Starlette(routes=[Route("/stream", forever)])

    async def main() -> None:
        state["ended"] = asyncio.Event()
        parts = call(app, Forwarded("GET", "/stream"))
        assert isinstance(await parts.__anext__(), ResponseStart)
        assert await parts.__anext__() == b"part 0\n"
        assert await parts.__anext__() == b"part 1\n"
        assert not state["ended"].is_set()
        await parts.aclose()
        await asyncio.wait_for(state["ended"].wait(), 5)

    asyncio.run(main())


def test_an_app_that_raises_answers_500_and_call_does_not_raise():
    async def boom(request: Request) -> JSONResponse:
        raise RuntimeError("boom")

    app = Starlette(routes=[Route("/boom", boom)])

    async def main() -> None:
        start, body = await _fetch(app, Forwarded("GET", "/boom"))
        assert start.status == 500
        assert body  # Starlette's error page

    asyncio.run(main())


def _lifespan_app(events: list[str], fail: str = "") -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        events.append("startup")
        if fail == "startup":
            raise RuntimeError("the model file is gone")
        yield
        events.append("shutdown")

    return Starlette(routes=[Route("/echo/{rest:path}", _echo)], lifespan=lifespan)


def test_lifespan_start_and_stop():
    events: list[str] = []
    app = _lifespan_app(events)

    async def main() -> None:
        lifespan = Lifespan(app)
        await lifespan.stop()  # before start: nothing to stop
        assert events == []
        await lifespan.start()
        assert events == ["startup"]
        start, _ = await _fetch(app, Forwarded("GET", "/echo/x"))
        assert start.status == 200
        await lifespan.stop()
        assert events == ["startup", "shutdown"]
        await lifespan.stop()  # twice: no-op
        assert events == ["startup", "shutdown"]

    asyncio.run(main())


async def _failed_start(app: Any) -> list[dict[str, Any]]:
    """Start ``app``'s lifespan, which must fail; what the loop's exception handler was told
    about afterwards, once the Lifespan is garbage (nothing should be left unretrieved)."""
    told: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: told.append(context))
    lifespan = Lifespan(app)
    with pytest.raises(RuntimeError, match="the model file is gone"):
        await asyncio.wait_for(lifespan.start(), 5)
    await asyncio.wait_for(lifespan.stop(), 5)  # after a failed start: returns
    del lifespan
    gc.collect()  # here, while the handler listens, not in a later test
    return told


def test_lifespan_start_raises_when_startup_fails():
    events: list[str] = []
    asyncio.run(_failed_start(_lifespan_app(events, fail="startup")))
    assert events == ["startup"]  # and no shutdown after a failed start


def test_a_failed_start_leaves_no_unretrieved_task_exception():
    told = asyncio.run(_failed_start(_lifespan_app([], fail="startup")))
    assert [c.get("message") for c in told] == []


def test_lifespan_start_does_not_hang_when_the_app_ends_without_replying():
    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # no lifespan support (raising here hangs start() the same way)

    async def main() -> None:
        lifespan = Lifespan(app)
        with contextlib.suppress(RuntimeError, AssertionError):
            await asyncio.wait_for(lifespan.start(), 3)

    asyncio.run(main())
