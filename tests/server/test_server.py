"""pyllama-server through real HTTP: the openai SDK and httpx against a running server
with the real model."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from helpers.servers import running_server

http = httpx.Client(timeout=120.0)  # generous: CI machines may be slow
CHAT = [{"role": "user", "content": "Name three colors."}]


@pytest.fixture(scope="module")
def client(server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server + "/v1", api_key="unused")


def sse_events(resp: httpx.Response) -> list:
    out = []
    for line in resp.iter_lines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_health_and_models(server, client):
    assert http.get(server + "/health").json() == {"status": "ok"}
    models = client.models.list()
    # named as llama-server names it without --alias: the path it was loaded from
    assert len(models.data) == 1 and Path(models.data[0].id).name.startswith("SmolLM2")
    props = http.get(server + "/props").json()
    assert props["total_slots"] == 4
    assert "<|im_start|>" in props["chat_template"]


def test_chat_completion_stream_equals_non_stream(client):
    full = client.chat.completions.create(model="x", messages=CHAT, max_tokens=24, temperature=0)
    text = full.choices[0].message.content
    assert full.choices[0].message.role == "assistant" and text
    n = full.usage.completion_tokens
    assert 0 < n <= 24
    assert full.choices[0].finish_reason == ("length" if n == 24 else "stop")
    chunks = list(
        client.chat.completions.create(
            model="x",
            messages=CHAT,
            max_tokens=24,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    assert chunks[-1].usage.completion_tokens == n


def test_chat_logprobs_n_and_seed(client):
    r = client.chat.completions.create(
        model="x",
        messages=CHAT,
        max_tokens=6,
        temperature=1.0,
        seed=7,
        n=2,
        logprobs=True,
        top_logprobs=3,
    )
    assert [c.index for c in r.choices] == [0, 1]
    lp = r.choices[0].logprobs.content
    assert len(lp) == 6 and all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in lp)
    again = client.chat.completions.create(
        model="x", messages=CHAT, max_tokens=6, temperature=1.0, seed=7, n=2
    )
    assert [c.message.content for c in again.choices] == [c.message.content for c in r.choices]


def test_json_schema_response_format(client):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    r = client.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "Invent a person."}],
        max_tokens=60,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
    )
    obj = json.loads(r.choices[0].message.content)
    assert set(obj) == {"name", "age"} and isinstance(obj["age"], int)


def test_completions_sdk(client):
    r = client.completions.create(
        model="x", prompt="The capital of France is", max_tokens=8, temperature=0, stop=["\n"]
    )
    assert r.choices[0].text.startswith(" Paris")
    chunks = list(
        client.completions.create(
            model="x",
            prompt="The capital of France is",
            max_tokens=8,
            temperature=0,
            stop=["\n"],
            stream=True,
        )
    )
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text


def test_native_completion_prompts(server):
    tok = http.post(server + "/tokenize", json={"content": "The capital of France is"}).json()
    ids = tok["tokens"]
    base = {"n_predict": 6, "temperature": 0, "return_tokens": True}
    by_text = http.post(
        server + "/completion", json={**base, "prompt": "The capital of France is"}
    ).json()
    by_ids = http.post(server + "/completion", json={**base, "prompt": ids}).json()
    mixed = http.post(
        server + "/completion", json={**base, "prompt": ["The capital", *ids[2:]]}
    ).json()
    assert by_text["content"] == by_ids["content"] == mixed["content"]
    assert len(by_text["tokens"]) == 6 and by_text["stop_type"] == "limit"
    assert by_text["timings"]["predicted_n"] == 6
    many = http.post(
        server + "/completion", json={**base, "prompt": ["Hello", "The capital of France is"]}
    ).json()
    assert [m["index"] for m in many] == [0, 1] and many[1]["content"] == by_text["content"]


def test_native_stream_and_probs(server):
    body = {"prompt": "Once upon a time", "n_predict": 5, "temperature": 0, "n_probs": 2}
    with http.stream("POST", server + "/completion", json={**body, "stream": True}) as r:
        events = sse_events(r)
    assert events[-1]["stop"] is True and events[-1]["tokens_predicted"] == 5
    text = "".join(e["content"] for e in events[:-1])
    full = http.post(server + "/completion", json=body).json()
    assert text == full["content"]
    probs = full["completion_probabilities"]
    assert len(probs) == 5 and all(len(p["top_logprobs"]) == 2 for p in probs)
    assert probs[0]["id"] == probs[0]["top_logprobs"][0]["id"]  # greedy picks the top one


def test_tokenize_detokenize_template(server):
    r = http.post(server + "/tokenize", json={"content": "héllo world", "with_pieces": True}).json()
    ids = [t["id"] for t in r["tokens"]]
    assert "".join(t["piece"] for t in r["tokens"] if isinstance(t["piece"], str)) == "héllo world"
    assert (
        http.post(server + "/detokenize", json={"tokens": ids}).json()["content"] == "héllo world"
    )
    prompt = http.post(server + "/apply-template", json={"messages": CHAT}).json()["prompt"]
    assert prompt.endswith("<|im_start|>assistant\n") and "Name three colors." in prompt


def test_errors_use_the_envelope(server):
    r = http.post(server + "/completion", content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = http.post(server + "/completion", json={"prompt": "x", "n_predict": "many"})
    assert r.status_code == 400 and "n_predict" in r.json()["error"]["message"]
    r = http.post(server + "/v1/chat/completions", json={"messages": []})
    assert r.status_code == 400
    r = http.post(
        server + "/v1/chat/completions", json={"messages": [{"role": "wizard", "content": "x"}]}
    )
    assert r.status_code == 400 and "role" in r.json()["error"]["message"]
    r = http.get(server + "/no/such/route")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    r = http.post(server + "/completion", json={"prompt": [10**9]})
    assert r.status_code == 400 and "out of range" in r.json()["error"]["message"]


def test_context_overflow_is_refused_before_any_byte(server):  # item 12
    long = "hello " * 3000  # more than a slot's 2048 tokens
    for stream in (False, True):
        r = http.post(server + "/completion", json={"prompt": long, "stream": stream})
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["type"] == "exceed_context_size_error"
        assert err["n_ctx"] == 2048 and err["n_prompt_tokens"] > 2048


def test_disconnect_frees_the_slot(server):  # item 23
    body = {"prompt": "Count forever:", "n_predict": 4000, "ignore_eos": True, "stream": True}
    with http.stream("POST", server + "/completion", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                break
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if all(not s["is_processing"] for s in http.get(server + "/slots").json()):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the slot was still busy 10 s after the client left")


def test_metrics(server):
    text = http.get(server + "/metrics").text
    assert "# TYPE llamacpp:prompt_tokens_total counter" in text
    assert "# TYPE llamacpp:n_tokens_max counter" in text  # a running maximum, as llama-server
    values = dict(line.split() for line in text.splitlines() if not line.startswith("#"))
    assert float(values["llamacpp:tokens_predicted_total"]) > 0


def test_api_keys_and_overload(smollm_path):  # items 28 and 32
    args = ["-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1", "--max-queue", "0"]
    with running_server(*args, "--api-key", "k1,k2", "--max-body-bytes", "4096") as url:
        assert http.get(url + "/health").status_code == 200  # public
        r = http.post(url + "/completion", json={"prompt": "hi", "n_predict": 1})
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        ok = {"Authorization": "Bearer k2"}
        assert (
            http.post(
                url + "/completion", json={"prompt": "hi", "n_predict": 1}, headers=ok
            ).status_code
            == 200
        )
        assert (
            http.post(
                url + "/tokenize", json={"content": "hi"}, headers={"X-Api-Key": "k1"}
            ).status_code
            == 200
        )
        r = http.post(url + "/tokenize", content=b"x" * 5000, headers=ok)
        assert r.status_code == 413
        body = {"prompt": "Count:", "n_predict": 2000, "ignore_eos": True, "stream": True}
        with http.stream("POST", url + "/completion", json=body, headers=ok) as busy:
            lines = busy.iter_lines()  # keep a reference: a collected iterator closes the stream
            next(lines)
            r = http.post(url + "/completion", json={"prompt": "hi", "n_predict": 1}, headers=ok)
            assert r.status_code == 503 and r.json()["error"]["type"] == "unavailable_error"


def test_unknown_flag_fails_clearly():
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.server", "--no-such-flag"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    assert r.returncode == 2 and "--no-such-flag" in r.stderr


def test_embeddings_endpoints():
    """--embeddings with a real sentence-embedding model (all-MiniLM-L6-v2 as GGUF)."""
    from pyllama.models import embedding_model

    sentences = ["A man is eating food.", "A man is eating a piece of bread.", "A girl is singing."]
    with running_server("-m", embedding_model(), "-t", "2", "-np", "2", "--embeddings") as url:
        sdk = openai.OpenAI(base_url=url + "/v1", api_key="unused")
        r = sdk.embeddings.create(model="x", input=sentences)
        vecs = [d.embedding for d in r.data]
        assert [d.index for d in r.data] == [0, 1, 2] and len(vecs[0]) == 384
        assert r.usage.prompt_tokens > 3
        dot = [sum(a * b for a, b in zip(vecs[0], v)) for v in vecs]
        assert abs(dot[0] - 1.0) < 1e-3  # normalized
        assert dot[1] > dot[2]  # bread is closer to food than singing
        b64 = sdk.embeddings.create(model="x", input=sentences[0], encoding_format="base64")
        raw = np.frombuffer(base64.b64decode(b64.data[0].embedding), dtype=np.float32)
        assert raw.tolist() == pytest.approx(vecs[0], abs=1e-6)
        native = http.post(url + "/embedding", json={"content": sentences[0]}).json()
        assert native[0]["embedding"][0] == pytest.approx(vecs[0], abs=1e-6)
        r = http.post(url + "/v1/chat/completions", json={"messages": CHAT})
        # llama-server's answer: a pooled embedding model (no KV cache) cannot generate
        assert r.status_code == 500 and "logits" in r.json()["error"]["message"]


@pytest.mark.flag_effect("--slot-save-path")
def test_slot_save_restore_erase(smollm_path, tmp_path):  # item 21
    args = ["-m", smollm_path, "-t", "2", "-c", "2048", "-np", "2"]
    with running_server(*args, "--slot-save-path", str(tmp_path)) as url:
        body = {"prompt": "The history of Rome is long and", "n_predict": 8, "temperature": 0}
        first = http.post(url + "/completion", json={**body, "id_slot": 0}).json()
        saved = http.post(url + "/slots/0?action=save", json={"filename": "rome.bin"}).json()
        assert saved["n_saved"] > 0 and (tmp_path / "rome.bin").stat().st_size == saved["n_written"]
        assert http.post(url + "/slots/0?action=erase").json()["n_erased"] == saved["n_saved"]
        restored = http.post(url + "/slots/1?action=restore", json={"filename": "rome.bin"}).json()
        assert restored["n_restored"] == saved["n_saved"]
        again = http.post(url + "/completion", json={**body, "id_slot": 1}).json()
        assert again["content"] == first["content"]
        assert again["timings"]["cache_n"] == first["tokens_evaluated"] - 1  # from the file
        for bad in ("../x.bin", "/etc/passwd", "a/b", ""):
            r = http.post(url + "/slots/0?action=save", json={"filename": bad})
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
        assert http.post(url + "/slots/0?action=fly", json={}).status_code == 400
        assert http.post(url + "/slots/9?action=erase").status_code == 400


@pytest.mark.flag_effect("--lora")
def test_lora_adapters_endpoint(smollm_path, tmp_path):
    from helpers.lora_adapter import write_lora

    adapter = write_lora(smollm_path, tmp_path / "a.gguf", rank=4, seed=0, a_type="q4_1")
    args = ["-m", smollm_path, "-t", "2", "-c", "1024", "-np", "1", "--lora", str(adapter)]
    with running_server(*args) as url:
        assert http.get(url + "/lora-adapters").json() == [
            {"id": 0, "path": str(adapter), "scale": 1.0}
        ]
        body = {"prompt": "My favourite fruit is", "n_predict": 12, "temperature": 0}
        adapted = http.post(url + "/completion", json=body).json()["content"]
        base = http.post(url + "/completion", json={**body, "lora": [{"id": 0, "scale": 0}]})
        assert base.json()["content"] != adapted
        assert http.post(url + "/lora-adapters", json=[{"id": 0, "scale": 0.0}]).json()["success"]
        assert http.get(url + "/lora-adapters").json()[0]["scale"] == 0.0
        assert http.post(url + "/completion", json=body).json()["content"] == base.json()["content"]
        r = http.post(url + "/lora-adapters", json=[{"id": 3, "scale": 1}])
        assert r.status_code == 400
