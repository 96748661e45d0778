"""llama.cpp's corpus of real chat templates (``vendor/llama.cpp/models/templates``) asked
the same questions on pyllama-server and llama-server: what each case sends, and each
answer reduced to what must be equal (ids, timestamps and timings dropped; streams as their
concatenated deltas and final message). Used by ``tests/chat/test_template_corpus.py`` and,
as a script, to print the table of docs/compatibility.md:

    python tests/helpers/template_corpus.py --model M.gguf --peer PATH/llama-server
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather of a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 12}},
                "required": ["city"],
            },
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
USER = {"role": "user", "content": "What is the weather in Paris?"}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
N_PREDICT = 24
# the server flags both take, beside -m and --chat-template-file
FLAGS = ["-c", "4096", "-np", "1", "-t", "1", "--jinja", "--temp", "0", "--seed", "1"]

RENDERS: dict[str, dict[str, Any]] = {
    "plain": {"messages": [USER]},
    "system": {"messages": [{"role": "system", "content": "Be brief."}, USER]},
    "tools": {"messages": [USER], "tools": TOOLS},
    "tool_history": {
        "messages": [
            USER,
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        "tools": TOOLS,
    },
    "reasoning": {
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Add them."},
            {"role": "user", "content": "And 3+3?"},
        ]
    },
}


def _strip_ids(value: Any) -> Any:
    """The value without what is random or timed per answer."""
    drop = {
        "id",
        "created",
        "created_at",
        "system_fingerprint",
        "timings",
        "call_id",
        "tool_call_id",
        "signature",
        "model",
        "usage",
        "completed_at",
    }
    if isinstance(value, dict):
        return {k: _strip_ids(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_strip_ids(v) for v in value]
    return value


def _answer(r: httpx.Response, reduce: Callable[[Any], Any]) -> Any:
    if r.status_code != 200:
        return {"http_status": r.status_code}
    return reduce(r.json())


def _sse(r: httpx.Response) -> list[Any]:
    out = []
    for line in r.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def _failed(event: Any) -> bool:
    """An error sent after the stream began: OpenAI's ``{"error": ...}``, Anthropic's
    ``error`` event (llama-server's data: code, message, type), Responses' ``error``."""
    if not isinstance(event, dict):
        return False
    return "error" in event or event.get("type") in ("error", "server_error") or "code" in event


def _stream_answer(r: httpx.Response, fold: Callable[[list[Any]], Any]) -> Any:
    if r.status_code != 200:
        return {"http_status": r.status_code}
    events = _sse(r)
    if any(_failed(e) for e in events):
        return {"stream_error": True, "folded": fold([e for e in events if not _failed(e)])}
    return fold(events)


# --- OpenAI chat


def _openai_whole(body: Any) -> Any:
    c = body["choices"][0]
    msg = _strip_ids(c["message"])
    return {"message": msg, "finish_reason": c["finish_reason"]}


def _openai_fold(events: list[Any]) -> Any:
    content, reasoning, calls, finish = "", "", {}, None
    for e in events:
        for c in e.get("choices") or []:
            d = c.get("delta") or {}
            content += d.get("content") or ""
            reasoning += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            finish = c.get("finish_reason") or finish
    return {
        "content": content,
        "reasoning": reasoning,
        "calls": [calls[i] for i in sorted(calls)],
        "finish_reason": finish,
    }


# --- Anthropic messages


def _anthropic_whole(body: Any) -> Any:
    return {"content": _strip_ids(body["content"]), "stop_reason": body["stop_reason"]}


def _anthropic_fold(events: list[Any]) -> Any:
    blocks: dict[int, dict[str, Any]] = {}
    stop = None
    for e in events:
        kind = e.get("type")
        if kind == "content_block_start":
            # a tool_use block opens with "input": {} here, as Anthropic's API sends it
            # (llama-server leaves it out; a listed difference): the deltas carry the input
            block = _drop(_strip_ids(e["content_block"]), "input")
            blocks[e["index"]] = {**block, "delta": ""}
        elif kind == "content_block_delta":
            d = e["delta"]
            blocks[e["index"]]["delta"] += (
                d.get("text") or d.get("thinking") or d.get("partial_json") or ""
            )
        elif kind == "message_delta":
            stop = e["delta"].get("stop_reason")
    return {"blocks": [blocks[i] for i in sorted(blocks)], "stop_reason": stop}


# --- OpenAI Responses


def _responses_whole(body: Any) -> Any:
    """The output items without their status: pyllama says "incomplete" for a reply cut by
    max_output_tokens, as OpenAI's API (incomplete_details), where llama-server says
    "completed" (a listed difference, docs/compatibility.md)."""
    return {"output": _drop(_strip_ids(body["output"]), "status")}


def _drop(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return {k: _drop(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_drop(v, key) for v in value]
    return value


def _responses_fold(events: list[Any]) -> Any:
    deltas: dict[str, str] = {}
    final = None
    for e in events:
        kind = e.get("type", "")
        if kind.endswith(".delta"):
            deltas[kind] = deltas.get(kind, "") + (e.get("delta") or "")
        elif kind == "response.completed":
            final = _responses_whole(e["response"])
    return {"deltas": deltas, "final": final}


def _chat_cases() -> dict[str, tuple[str, dict[str, Any], Callable[[httpx.Response], Any]]]:
    cases: dict[str, tuple[str, dict[str, Any], Callable[[httpx.Response], Any]]] = {}
    for choice in ("auto", "required"):
        openai = {
            "messages": [USER],
            "tools": TOOLS,
            "tool_choice": choice,
            "max_tokens": N_PREDICT,
        }
        anthropic = {
            "messages": [USER],
            "tools": ANTHROPIC_TOOLS,
            "max_tokens": N_PREDICT,
            "tool_choice": {"type": "auto" if choice == "auto" else "any"},
        }
        responses = {
            "input": USER["content"],
            "tools": RESPONSES_TOOLS,
            "tool_choice": choice,
            "max_output_tokens": N_PREDICT,
        }
        for stream in (False, True):
            tag = f"{choice}{'_stream' if stream else ''}"
            if stream:
                cases[f"openai_{tag}"] = (
                    "/v1/chat/completions",
                    {**openai, "stream": True},
                    lambda r: _stream_answer(r, _openai_fold),
                )
                cases[f"anthropic_{tag}"] = (
                    "/v1/messages",
                    {**anthropic, "stream": True},
                    lambda r: _stream_answer(r, _anthropic_fold),
                )
                cases[f"responses_{tag}"] = (
                    "/v1/responses",
                    {**responses, "stream": True},
                    lambda r: _stream_answer(r, _responses_fold),
                )
            else:
                cases[f"openai_{tag}"] = (
                    "/v1/chat/completions",
                    openai,
                    lambda r: _answer(r, _openai_whole),
                )
                cases[f"anthropic_{tag}"] = (
                    "/v1/messages",
                    anthropic,
                    lambda r: _answer(r, _anthropic_whole),
                )
                cases[f"responses_{tag}"] = (
                    "/v1/responses",
                    responses,
                    lambda r: _answer(r, _responses_whole),
                )
    return cases


CHATS = _chat_cases()
CASES = [*(f"render_{k}" for k in RENDERS), *CHATS]


def ask(url: str) -> dict[str, Any]:
    """Every case's reduced answer from the server at ``url``; a server that went away
    (llama-server aborts on some templates) answers ``{"unreachable": True}``. One
    connection a request: cpp-httplib closes a kept-alive connection after a few requests,
    and a request sent on it as it closes would count as an answer llama-server never gave."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=120, headers={"Connection": "close"}) as c:

        def post(path: str, body: Any, reduce: Callable[[httpx.Response], Any]) -> Any:
            try:
                return reduce(c.post(path, json=body))
            except httpx.TransportError:
                return {"unreachable": True}

        for name, body in RENDERS.items():
            out[f"render_{name}"] = post(
                "/apply-template",
                body,
                lambda r: (
                    r.json()["prompt"] if r.status_code == 200 else {"http_status": r.status_code}
                ),
            )
        for name, (path, body, reduce) in CHATS.items():
            out[name] = post(path, body, reduce)
    return out


def ollama_matches_openai(url: str) -> tuple[Any, Any]:
    """(Ollama /api/chat's message, the same server's OpenAI message) for tools, auto:
    content, thinking and calls (arguments as objects)."""
    with httpx.Client(base_url=url, timeout=120, headers={"Connection": "close"}) as c:
        o = c.post(
            "/api/chat",
            json={
                "model": "m",
                "messages": [USER],
                "tools": TOOLS,
                "stream": False,
                "options": {"num_predict": N_PREDICT, "temperature": 0, "seed": 1},
            },
        )
        a = c.post(
            "/v1/chat/completions",
            json={"messages": [USER], "tools": TOOLS, "max_tokens": N_PREDICT},
        )
    if o.status_code != 200 or a.status_code != 200:
        return {"http_status": o.status_code}, {"http_status": a.status_code}
    om, am = o.json()["message"], a.json()["choices"][0]["message"]
    ours = {
        "content": om.get("content") or "",
        "thinking": om.get("thinking") or "",
        "calls": [
            (t["function"]["name"], t["function"]["arguments"]) for t in om.get("tool_calls") or []
        ],
    }
    theirs = {
        "content": am.get("content") or "",
        "thinking": am.get("reasoning_content") or "",
        "calls": [
            (t["function"]["name"], json.loads(t["function"]["arguments"]))
            for t in am.get("tool_calls") or []
        ],
    }
    return ours, theirs


def deliberate(ours: Any, peer: Any) -> bool:
    """The one listed difference (docs/compatibility.md): where llama-server answers 500
    because the model's output does not parse as a tool call, pyllama answers 200 with the
    text as content (in a stream: the rest of the text follows as content)."""
    if isinstance(peer, dict) and peer.get("http_status") == 500:
        return not (isinstance(ours, dict) and "http_status" in ours)
    return isinstance(peer, dict) and peer.get("stream_error") is True


def _unreachable(answer: Any) -> bool:
    return isinstance(answer, dict) and answer.get("unreachable") is True


def compare(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, str]:
    """case -> "=" (the same), "~" (the deliberate difference), "!" (llama-server crashed,
    pyllama answered) or "x" (a defect)."""

    def verdict(a: Any, b: Any) -> str:
        if a == b:
            return "="
        if _unreachable(b) and not _unreachable(a):
            return "!"
        return "~" if deliberate(a, b) else "x"

    return {k: verdict(ours[k], peer[k]) for k in CASES}


def templates(root: Path) -> list[Path]:
    return sorted((root / "models" / "templates").glob("*.jinja"))


@contextlib.contextmanager
def both_servers(
    model: str, template: Path, peer: str, ours_cmd: list[str]
) -> Iterator[tuple[str, str]]:
    """pyllama-server (``ours_cmd``) and llama-server (``peer``) on ``template``, started
    together, yielded as URLs once both are healthy."""
    from helpers.servers import start_process, stop_process, wait_healthy

    args = ["-m", model, "--chat-template-file", str(template), *FLAGS]
    a, url_a = start_process([*ours_cmd, *args])
    b, url_b = start_process([peer, *args])
    try:
        wait_healthy(url_a, a, 180)
        wait_healthy(url_b, b, 180)
        yield url_a, url_b
    finally:
        stop_process(a)
        stop_process(b)


def table(rows: dict[str, dict[str, str]]) -> str:
    """The markdown table of docs/compatibility.md: templates x cases."""
    head = "| template | " + " | ".join(c.replace("render_", "r:") for c in CASES) + " |"
    lines = [head, "|" + " --- |" * (len(CASES) + 1)]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(row[c] for c in CASES) + " |")
    return "\n".join(lines)


def main() -> None:
    import argparse

    from helpers.servers import PYLLAMA_SERVER

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--peer", required=True)
    p.add_argument("--vendor", default=str(Path(__file__).parents[2] / "vendor" / "llama.cpp"))
    a = p.parse_args()
    rows = {}
    for t in templates(Path(a.vendor)):
        with both_servers(a.model, t, a.peer, PYLLAMA_SERVER) as (ours, peer):
            rows[t.stem] = compare(ask(ours), ask(peer))
        print(t.stem, "".join(rows[t.stem].values()), file=sys.stderr)
    print(table(rows))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: helpers, fixtures
    main()
