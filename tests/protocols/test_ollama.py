"""The Ollama API of pyllama-server through the real ``ollama`` client (and httpx for the
wire details) against a running server with the real model."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import ollama
import pytest

from pyllama import hardware

from helpers.servers import running_server

http = httpx.Client(timeout=300.0)  # generous: CI machines may be slow
SAY = [{"role": "user", "content": "Name three colors."}]
JSON_PROMPT = 'Reply with a JSON object with one key "color" and a color as its value.'
GREEDY = {"temperature": 0, "num_predict": 24}
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city"}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[ollama.Client]:
    with ollama.Client(host=server, timeout=300) as c:
        yield c


def served_name(server: str) -> str:
    return http.get(server + "/v1/models").json()["data"][0]["id"]


def show_path(server: str) -> str:
    return http.get(server + "/props").json()["model_path"]


def check_done(r: ollama.ChatResponse | ollama.GenerateResponse, limit: int) -> None:
    assert r.done is True
    assert 0 < r.eval_count <= limit
    assert r.done_reason == ("length" if r.eval_count == limit else "stop")
    # the shared server never sleeps: the model was in memory, no request waits for a load
    assert r.prompt_eval_count > 0 and r.total_duration > 0 and r.load_duration == 0
    assert r.prompt_eval_duration > 0 and r.eval_duration > 0
    assert r.total_duration >= r.prompt_eval_duration + r.eval_duration
    assert RFC3339_Z.match(r.created_at)


def test_chat_and_stream(client):
    r = client.chat(model="any-name:7b", messages=SAY, options=GREEDY)
    assert isinstance(r, ollama.ChatResponse)
    assert r.model == "any-name:7b"  # the request's name comes back
    assert r.message.role == "assistant" and r.message.content
    assert r.message.tool_calls is None and r.message.thinking is None
    check_done(r, 24)
    chunks = list(client.chat(model="x", messages=SAY, options=GREEDY, stream=True))
    assert all(isinstance(c, ollama.ChatResponse) for c in chunks)
    assert [c.done for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert len(chunks) > 2 and all(c.message.role == "assistant" for c in chunks)
    assert "".join(c.message.content or "" for c in chunks) == r.message.content
    last = chunks[-1]
    check_done(last, 24)
    assert last.eval_count == r.eval_count and last.prompt_eval_count == r.prompt_eval_count


def test_stream_is_default_ndjson(server):
    with http.stream("POST", server + "/api/chat", json={"messages": SAY, "options": GREEDY}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert len(lines) > 2 and lines[-1]["done"] is True
    first = lines[0]
    assert set(first) == {"model", "created_at", "message", "done"} and first["done"] is False
    assert first["message"]["role"] == "assistant" and RFC3339_Z.match(first["created_at"])
    for key in ("total_duration", "prompt_eval_count", "eval_count", "eval_duration"):
        assert isinstance(lines[-1][key], int)


def test_generate_and_stream(client, server):
    prompt = "Why is the sky blue?"
    g = client.generate(model="x", prompt=prompt, options=GREEDY)
    assert isinstance(g, ollama.GenerateResponse) and g.response
    check_done(g, 24)
    chunks = list(client.generate(model="x", prompt=prompt, options=GREEDY, stream=True))
    assert [c.done for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert "".join(c.response for c in chunks) == g.response
    check_done(chunks[-1], 24)
    # without raw the prompt goes through the chat template, as a user turn
    chat = client.chat(model="x", messages=[{"role": "user", "content": prompt}], options=GREEDY)
    assert chat.message.content == g.response
    assert chat.prompt_eval_count == g.prompt_eval_count
    brief = client.generate(model="x", prompt=prompt, system="Be brief.", options=GREEDY)
    as_chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]
    chat = client.chat(model="x", messages=as_chat, options=GREEDY)
    assert brief.prompt_eval_count == chat.prompt_eval_count != g.prompt_eval_count
    assert brief.response == chat.message.content
    # raw: the prompt as given, no template
    raw = client.generate(model="x", prompt=prompt, raw=True, options=GREEDY)
    tokens = http.post(server + "/tokenize", json={"content": prompt, "add_special": True}).json()
    assert raw.prompt_eval_count == len(tokens["tokens"]) < g.prompt_eval_count
    check_done(raw, 24)
    raw_chunks = list(
        client.generate(model="x", prompt=prompt, raw=True, options=GREEDY, stream=True)
    )
    assert "".join(c.response for c in raw_chunks) == raw.response
    assert raw_chunks[-1].done and raw_chunks[-1].eval_count == raw.eval_count


def test_num_predict_and_options(client):
    long = [{"role": "user", "content": "Write a long story about a dragon."}]
    r = client.chat(model="x", messages=long, options={"temperature": 0, "num_predict": 5})
    assert r.eval_count == 5 and r.done_reason == "length"
    g = client.generate(model="x", prompt="Count to fifty.", options={"num_predict": 3, "seed": 3})
    assert g.eval_count == 3 and g.done_reason == "length"
    # stop strings end the reply before the limit; load-time options are accepted, ignored
    opts = {
        "temperature": 0,
        "num_predict": 24,
        "stop": ["2."],
        "num_thread": 2,
        "num_gpu": 0,
        "use_mmap": True,
        "numa": False,
        "num_batch": 8,
        "num_ctx": 2048,  # equal to a slot's context: fine
        "some_future_option": 1,
    }
    s = client.chat(model="x", messages=SAY, options=opts)
    full = client.chat(model="x", messages=SAY, options=GREEDY)
    assert "2." in full.message.content and "2." not in s.message.content
    assert full.message.content.startswith(s.message.content)
    assert s.done_reason == "stop" and s.eval_count < full.eval_count
    # a seed makes sampling repeatable
    hot = {"temperature": 1.0, "seed": 42, "num_predict": 12}
    a = client.generate(model="x", prompt="Tell me a joke.", options=hot)
    b = client.generate(
        model="x", prompt="Tell me a joke.", options=hot, keep_alive="5m", think=False
    )
    assert a.response == b.response


def busy(server: str) -> bool:
    return any(s["is_processing"] for s in http.get(server + "/slots").json())


def test_disconnect_frees_the_slot(server):  # item 23
    # greedy: a sampled continuation can end with EOS before the check below
    opts = {"num_predict": 4000, "temperature": 0}
    body = {"prompt": "1, 2, 3, 4, 5,", "raw": True, "options": opts}
    with http.stream("POST", server + "/api/generate", json=body) as r:
        for _ in zip(range(3), r.iter_lines()):
            pass
        assert busy(server)  # still generating when the client leaves
    deadline = time.monotonic() + 10
    while busy(server):
        if time.monotonic() > deadline:
            pytest.fail("the slot was still busy 10 s after the client left")
        time.sleep(0.1)


def test_format_json_and_schema(client):
    msgs = [{"role": "user", "content": JSON_PROMPT}]
    r = client.chat(
        model="x", messages=msgs, format="json", options={"temperature": 0, "num_predict": 64}
    )
    assert r.done_reason == "stop"
    assert isinstance(json.loads(r.message.content), dict)
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    person = [{"role": "user", "content": "Describe a person."}]
    r = client.chat(
        model="x", messages=person, format=schema, options={"temperature": 0, "num_predict": 64}
    )
    obj = json.loads(r.message.content)
    assert set(obj) == {"name", "age"}
    assert isinstance(obj["name"], str) and len(obj["name"]) <= 20
    assert isinstance(obj["age"], int) and 0 <= obj["age"] <= 150
    # generate, raw too: the grammar applies on the raw completion path as well
    g = client.generate(
        model="x", prompt=JSON_PROMPT, format="json", options={"temperature": 0, "num_predict": 64}
    )
    assert isinstance(json.loads(g.response), dict)
    enum = {
        "type": "object",
        "properties": {"color": {"enum": ["red", "blue"]}},
        "required": ["color"],
    }
    raw = client.generate(
        model="x", prompt="The sky is", raw=True, format=enum, options={"num_predict": 32}
    )
    assert json.loads(raw.response)["color"] in ("red", "blue")


def test_tool_call_round_trip(tool_server):
    """Ollama's shapes through a template that renders tools: a call the client sends back
    (arguments as an object, the result by ``tool_name``) is rendered in the template's own
    syntax and the result is read (more prompt for a longer result). Whether this model calls
    a tool is its own choice; the same server's OpenAI chat gives the same message
    (tests/chat/test_template_corpus.py checks that on every template)."""
    with ollama.Client(host=tool_server, timeout=300) as client:
        ask = [{"role": "user", "content": "Call the get_weather tool for Paris."}]
        call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        opts = {"temperature": 0, "num_predict": 8}

        def answer(result: str) -> ollama.ChatResponse:
            sent = {"role": "assistant", "content": "", "tool_calls": [call]}
            tool = {"role": "tool", "content": result, "tool_name": "get_weather"}
            return client.chat(model="x", messages=[*ask, sent, tool], tools=WEATHER, options=opts)

        long, short = (
            answer("Sunny, 22 degrees Celsius, a light wind from the west"),
            answer("Sunny"),
        )
        assert long.done is True and long.prompt_eval_count > short.prompt_eval_count + 10
        sent = {
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
        history = [
            *ask,
            {"role": "assistant", "content": "", "tool_calls": [sent]},
            {"role": "tool", "content": "Sunny"},
        ]
        r = httpx.post(tool_server + "/apply-template", json={"messages": history}, timeout=30)
        prompt = r.json()["prompt"]
        assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}' in prompt


def test_model_endpoints(client, server):
    name = served_name(server)
    models = client.list().models
    assert [m.model for m in models] == [name]
    m = models[0]
    path = show_path(server)
    assert m.size == os.path.getsize(path)
    assert m.digest == hashlib.sha256(Path(path).read_bytes()).hexdigest()  # Ollama's: the blob's
    assert m.modified_at.tzinfo is not None and m.modified_at < datetime.now(timezone.utc)
    d = m.details
    assert (d.format, d.family, d.families, d.quantization_level) == (
        "gguf",
        "llama",
        ["llama"],
        "Q4_1",
    )
    assert d.parameter_size.endswith("M")
    show = client.show(name)
    assert "im_start" in show.template
    assert show.capabilities == ["completion", "tools"]
    assert show.modelinfo["general.architecture"] == "llama"
    assert show.modelinfo["llama.context_length"] == 8192
    assert show.modelinfo["general.parameter_count"] > 100_000_000
    assert show.details.quantization_level == "Q4_1" and "FROM " in show.modelfile
    assert "num_ctx" in show.parameters
    assert client.show(name + ":latest").template == show.template
    # one model, any name: /api/show answers as /api/chat does (llama-server's rule)
    assert client.show("no-such-model").modelinfo == show.modelinfo
    ps = client.ps().models
    assert [p.model for p in ps] == [name]
    assert ps[0].context_length == 8192 // 4  # a slot's context
    assert ps[0].expires_at > datetime.now(timezone.utc)
    assert ps[0].digest == m.digest
    if not any(d.type in ("gpu", "igpu") for d in hardware.devices()):
        assert ps[0].size_vram == 0  # nothing can be on a GPU
    else:  # the engine does not report per-device bytes yet: absent, not guessed
        assert ps[0].size_vram is None
    assert 50_000_000 < ps[0].size < m.size  # the weights: the file less its metadata
    v = http.get(server + "/api/version")
    assert v.status_code == 200 and re.fullmatch(r"\d+\.\d+\.\d+", v.json()["version"])
    assert http.get(server + "/").text == "Ollama is running"
    assert http.head(server + "/").status_code == 200


def test_num_ctx_above_the_slot_runs_in_the_slot(client):
    """As Ollama clamps a num_ctx above what it can give (the trained context) to it, a
    request asking more than a slot's context runs in the slot's: the same reply as
    without num_ctx; a prompt the slot cannot hold is still refused."""
    greedy = {"temperature": 0, "num_predict": 8}
    plain = client.chat(model="x", messages=SAY, options=greedy)
    for num_ctx in (8192, 100_000):
        r = client.chat(model="x", messages=SAY, options={**greedy, "num_ctx": num_ctx})
        assert r.message.content == plain.message.content
    g = client.generate(model="x", prompt="hi", options={**greedy, "num_ctx": 8192})
    assert g.response == client.generate(model="x", prompt="hi", options=greedy).response
    huge = [{"role": "user", "content": "hello " * 3000}]
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="x", messages=huge, options={"num_ctx": 8192})
    assert e.value.status_code == 400 and "context" in e.value.error


def test_context_overflow_streaming_is_refused_before_any_byte(client):
    huge = [{"role": "user", "content": "hello " * 5000}]
    with pytest.raises(ollama.ResponseError) as e:
        list(client.chat(model="x", messages=huge, stream=True))
    assert e.value.status_code == 400 and "context" in e.value.error


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/api/chat", {"model": "x"}, "'messages': Field required"),
        ("/api/chat", {"messages": []}, "'messages'"),
        ("/api/chat", {"messages": "hi"}, "'messages'"),
        ("/api/chat", {"messages": [{"role": 5}]}, "'messages.0.role'"),
        ("/api/chat", {"messages": [{"role": "robot", "content": "x"}]}, "role 'robot'"),
        (
            "/api/chat",
            {"messages": SAY, "options": {"temperature": "hot"}},
            "'options.temperature'",
        ),
        ("/api/chat", {"messages": SAY, "options": {"num_thread": "many"}}, "'options.num_thread'"),
        ("/api/chat", {"messages": SAY, "options": {"top_p": 5}}, "'top_p'"),
        ("/api/chat", {"messages": SAY, "options": "fast"}, "'options'"),
        ("/api/chat", {"messages": SAY, "stream": "maybe"}, "'stream'"),
        ("/api/chat", {"messages": SAY, "format": "xml"}, "invalid format"),
        ("/api/chat", {"messages": SAY, "format": {"type": "nonsense"}}, "JSON schema"),
        ("/api/chat", {"messages": SAY, "think": True}, "does not support thinking"),
        ("/api/chat", {"messages": SAY, "logprobs": True}, "'logprobs' is not supported"),
        (
            "/api/chat",
            {"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]},
            "image input is not supported",  # no projector
        ),
        (
            "/api/chat",
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                    }
                ]
            },
            "arguments",
        ),
        ("/api/generate", {"model": "x"}, "'prompt': Field required"),
        ("/api/generate", {"prompt": ""}, "'prompt'"),
        ("/api/generate", {"prompt": 42}, "'prompt'"),
        ("/api/generate", {"prompt": "x", "images": ["aGk="]}, "image input is not supported"),
        ("/api/generate", {"prompt": "x", "suffix": "y"}, "does not support insert"),
        ("/api/generate", {"prompt": "x", "raw": True, "system": "s"}, "raw mode"),
        ("/api/generate", {"prompt": "x", "template": "{{ .Prompt }}"}, "'template'"),
        ("/api/generate", {"prompt": "x", "context": "abc"}, "'context'"),
        ("/api/embed", {"input": "x"}, "embeddings"),
    ],
)
def test_bad_input(server, path, body, needle):
    r = http.post(server + path, json={"stream": False, **body})
    assert r.status_code in (400, 501), r.text
    err = r.json()
    assert list(err) == ["error"] and isinstance(err["error"], str) and needle in err["error"]


def test_bad_input_through_client(client, server):
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="x", messages=[])
    assert e.value.status_code == 400 and "'messages'" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model="x", options={"top_k": "many"})
    assert e.value.status_code == 400 and e.value.error.startswith("invalid request")
    r = http.post(
        server + "/api/chat", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and list(r.json()) == ["error"]
    assert http.get(server + "/api/nope").json() == {"error": "File Not Found"}
    # the server keeps serving
    assert client.chat(model="x", messages=SAY, options={"num_predict": 2}).done


def test_embed_endpoints():
    from pyllama.models import embedding_model

    sentences = ["A man is eating food.", "A man is eating a piece of bread.", "A girl is singing."]
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(
            running_server("-m", embedding_model(), "-t", "2", "-np", "2", "--embeddings")
        )
        c = stack.enter_context(ollama.Client(host=url, timeout=300))
        r = c.embed(model="minilm", input=sentences)
        assert isinstance(r, ollama.EmbedResponse) and r.model == "minilm"
        vecs = r.embeddings
        assert len(vecs) == 3 and all(len(v) == 384 for v in vecs)
        for v in vecs:
            assert math.isclose(math.fsum(x * x for x in v), 1.0, abs_tol=1e-4)  # L2-normalized
        dot = [math.fsum(a * b for a, b in zip(vecs[0], v)) for v in vecs]
        assert dot[1] > dot[2]  # bread is closer to food than singing
        assert r.prompt_eval_count > 10 and r.total_duration > 0
        two = c.embed(model="x", input=sentences[:2])
        assert len(two.embeddings) == 2
        one = c.embed(model="x", input=sentences[0])
        assert len(one.embeddings) == 1
        assert one.embeddings[0] == pytest.approx(vecs[0], abs=1e-5)
        # the older endpoint: the raw vector, the same direction
        old = c.embeddings(model="x", prompt=sentences[0]).embedding
        norm = math.sqrt(math.fsum(x * x for x in old))
        assert abs(norm - 1.0) > 1e-2
        assert [x / norm for x in old] == pytest.approx(vecs[0], abs=1e-5)
        short = c.embed(model="x", input=sentences[0], dimensions=16).embeddings[0]
        assert len(short) == 16 and math.isclose(math.fsum(x * x for x in short), 1.0, abs_tol=1e-4)
        # inputs past the context: cut by default, refused with truncate=False
        long = "word " * 2000
        assert c.embed(model="x", input=long).prompt_eval_count <= 512
        with pytest.raises(ollama.ResponseError) as e:
            c.embed(model="x", input=long, truncate=False)
        assert e.value.status_code == 400
        assert c.show(c.list().models[0].model).capabilities == ["embedding"]
        for body in (
            {"input": ""},
            {"input": []},
            {"input": 5},
            {},
            {"input": "x", "dimensions": 9999},
        ):
            bad = http.post(url + "/api/embed", json=body)
            assert bad.status_code == 400 and list(bad.json()) == ["error"], body
        bad = http.post(url + "/api/embeddings", json={})
        assert bad.status_code == 400 and "'prompt'" in bad.json()["error"]
        chat = http.post(url + "/api/chat", json={"messages": SAY, "stream": False})
        # a pooled embedding model has no KV cache: llama-server's 500 for generation
        assert chat.status_code == 500 and "logits" in chat.json()["error"]
