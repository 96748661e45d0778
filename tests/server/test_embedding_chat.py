"""``--embedding`` with a generative model serves completions, chat and embeddings from the
one model, as llama-server does; a pooled embedding-only model (no KV cache) answers a
generation request with llama-server's error. Real clients: openai, anthropic, ollama."""

from __future__ import annotations

import math

import anthropic
import httpx
import ollama
import openai
import pytest

from helpers.peer import running_peer
from helpers.servers import running_server

SAY = [{"role": "user", "content": "Name a colour."}]


@pytest.fixture(scope="module")
def both(smollm_path: str):
    with running_server(
        "-m", smollm_path, "-c", "2048", "-np", "2", "--embedding", "--pooling", "mean"
    ) as url:
        yield url


def _unit(v: list[float]) -> bool:
    return math.isclose(math.fsum(x * x for x in v), 1.0, abs_tol=1e-4)


def test_openai_client_chats_and_embeds(both: str) -> None:
    with openai.OpenAI(base_url=both + "/v1", api_key="unused", max_retries=0) as client:
        _chat_and_embed(client)


def _chat_and_embed(client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(
        model="x",
        messages=SAY,
        max_tokens=8,
        temperature=0,  # type: ignore[arg-type]
    )
    assert chat.choices[0].message.content and chat.usage and chat.usage.completion_tokens > 0
    emb = client.embeddings.create(model="x", input=["red", "a red colour", "tax law"])
    vecs = [d.embedding for d in emb.data]
    assert len(vecs) == 3 and all(len(v) == 576 and _unit(v) for v in vecs)
    assert vecs[0] != vecs[1] != vecs[2]
    # streaming chat still works after the embeddings, and greedy text is stable
    again = client.chat.completions.create(
        model="x",
        messages=SAY,
        max_tokens=8,
        temperature=0,  # type: ignore[arg-type]
    )
    assert again.choices[0].message.content == chat.choices[0].message.content
    pieces = client.chat.completions.create(
        model="x",
        messages=SAY,
        max_tokens=8,
        temperature=0,
        stream=True,  # type: ignore[arg-type]
    )
    text = "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)
    assert text == chat.choices[0].message.content


def test_anthropic_and_ollama_clients(both: str) -> None:
    with anthropic.Anthropic(base_url=both, api_key="unused", max_retries=0) as claude:
        msg = claude.messages.create(model="x", max_tokens=8, messages=SAY)  # type: ignore[arg-type]
    assert msg.content and msg.content[0].type == "text" and msg.content[0].text
    with ollama.Client(host=both, timeout=120) as c:
        _ollama(c)


def _ollama(c: ollama.Client) -> None:
    reply = c.chat(model="x", messages=SAY, options={"num_predict": 8})
    assert reply.message.content
    vecs = c.embed(model="x", input=["red", "blue"]).embeddings
    assert len(vecs) == 2 and all(len(v) == 576 and _unit(v) for v in vecs)
    caps = c.show("SmolLM2-135M-Instruct.Q4_1.gguf").capabilities or []
    assert "completion" in caps and "embedding" in caps


def test_embeddings_and_chat_at_once(both: str) -> None:
    """Both kinds in flight together: each decode is one kind; the vectors are exact and the
    chats run to their length. Their greedy text is not compared with the lone chat's: an
    embedding engine uses the unified KV cache, where a row's logits depend on what shares
    its batch (llama-server --kv-unified -np 2 flips this prompt's third token as well)."""
    import concurrent.futures as cf

    def chat() -> str:
        r = httpx.post(
            both + "/v1/chat/completions",
            json={"messages": SAY, "max_tokens": 16, "temperature": 0},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["usage"]["completion_tokens"] == 16
        return body["choices"][0]["message"]["content"]

    def embed() -> list[float]:
        r = httpx.post(both + "/v1/embeddings", json={"input": "red"}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["data"][0]["embedding"]

    alone_chat, alone_embd = chat(), embed()
    with cf.ThreadPoolExecutor(4) as pool:
        chats = [pool.submit(chat) for _ in range(2)]
        embds = [pool.submit(embed) for _ in range(4)]
        assert all(f.result() and alone_chat for f in chats)
        assert all(f.result() == pytest.approx(alone_embd, abs=1e-4) for f in embds)


def test_same_answers_as_llama_server(smollm_path: str) -> None:
    """Greedy chat text and mean-pooled vectors equal llama-server's, started alike (one
    input per request: llama-server -np 2 pools a batch of inputs over cut sequences)."""
    chat = {"messages": SAY, "max_tokens": 12, "temperature": 0}
    args = ("-m", smollm_path, "-c", "2048", "-np", "2", "--embedding", "--pooling", "mean")
    with running_server(*args) as both, running_peer(*args) as peer:
        for url in (both, peer):
            r = httpx.post(url + "/v1/chat/completions", json=chat, timeout=120)
            assert r.status_code == 200, r.text
        ours, theirs = (
            httpx.post(u + "/v1/chat/completions", json=chat, timeout=120).json()
            for u in (both, peer)
        )
        assert (
            ours["choices"][0]["message"]["content"] == theirs["choices"][0]["message"]["content"]
        )
        for text in ("red", "tax law", "The quick brown fox jumps over the lazy dog."):
            a, b = (
                httpx.post(u + "/v1/embeddings", json={"input": text}, timeout=120).json()
                for u in (both, peer)
            )
            assert a["data"][0]["embedding"] == pytest.approx(b["data"][0]["embedding"], abs=1e-5)


def test_a_pooled_embedding_model_refuses_generation() -> None:
    from pyllama.models import embedding_model

    with running_server("-m", embedding_model(), "--embedding", "-c", "512") as url:
        r = httpx.post(url + "/completion", json={"prompt": "hi", "n_predict": 4}, timeout=60)
        assert r.status_code == 500
        assert r.json()["error"]["message"] == (
            "the current context does not support logits computation. skipping"
        )
        ok = httpx.post(url + "/v1/embeddings", json={"input": "hi"}, timeout=60)
        assert ok.status_code == 200
