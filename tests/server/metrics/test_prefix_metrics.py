"""A wave of chat requests with one long system prompt: the server evaluates it once and
says so in each reply's timings (``shared_n``) and in /metrics."""

from __future__ import annotations

import asyncio
import uuid

import httpx


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30).text
    assert "# TYPE llamacpp:prompt_tokens_shared_total counter" in text
    # a series pyllama adds carries its model_name label: keyed by the name alone
    return {
        line.split()[0].split("{")[0]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("llamacpp:")
    }


def test_a_wave_shares_its_system_prompt(server):
    # unique to this test: no slot of the shared server holds it yet
    system = f"Session {uuid.uuid4()}. " + "You answer questions about the sea, briefly. " * 40
    questions = ["Why is the sea salty?", "How deep is the sea?", "Why are waves round?"]
    before = _metrics(server)["llamacpp:prompt_tokens_shared_total"]

    async def ask(client: httpx.AsyncClient, q: str) -> dict:
        body = {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
            "max_tokens": 4,
            "temperature": 0,
        }
        r = await client.post(server + "/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    async def wave() -> list[dict]:
        async with httpx.AsyncClient(timeout=300) as client:
            return await asyncio.gather(*[ask(client, q) for q in questions])

    replies = asyncio.run(wave())
    timings = [r["timings"] for r in replies]
    shared = sorted(t.get("shared_n", 0) for t in timings)
    # the first evaluates the system prompt (~400 tokens); the others copy it from its slot,
    # less the few template tokens their own slot still held ("<|im_start|>system\nSession")
    assert shared[0] == 0 and shared[1] > 350 and shared[2] > 350, timings
    assert sum(t["cache_n"] > 400 for t in timings) >= 2, timings
    for t, r in zip(timings, replies, strict=True):
        assert t["cache_n"] >= t.get("shared_n", 0)
        assert r["usage"]["prompt_tokens"] == t["cache_n"] + t["prompt_n"]
    after = _metrics(server)["llamacpp:prompt_tokens_shared_total"]
    assert after - before == sum(shared)
