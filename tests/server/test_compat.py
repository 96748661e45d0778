"""llama-server details its own test suite relies on: JSON prompt objects, header-name
case on the wire, llama.cpp's built-in chat formats by name."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx

from pyllama.chat import ChatTemplate

http = httpx.Client(timeout=120)  # generous: the machine may be busy with other tests


def test_json_prompt_objects(server):
    text = "I believe the meaning of life is"
    base = {"n_predict": 4, "temperature": 0}
    plain = http.post(server + "/completion", json={**base, "prompt": text}).json()
    one = http.post(server + "/completion", json={**base, "prompt": {"prompt_string": text}})
    assert one.status_code == 200 and one.json()["content"] == plain["content"]
    tokens = http.post(server + "/tokenize", json={"content": text, "add_special": True}).json()
    mixed = http.post(
        server + "/completion", json={**base, "prompt": [tokens["tokens"], {"prompt_string": text}]}
    )
    assert [r["content"] for r in mixed.json()] == [plain["content"]] * 2
    bad = {"prompt_string": text, "multimodal_data": ["aGVsbG8="]}
    r = http.post(server + "/completion", json={**base, "prompt": bad})
    assert r.status_code == 400 and "multimodal" in r.json()["error"]["message"]


def test_header_names_are_title_case_on_the_wire(server):
    host = urlsplit(server)
    with socket.create_connection((host.hostname, host.port)) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    names = [line.split(b":")[0] for line in head.split(b"\r\n")[1:]]
    assert b"Content-Type" in names and b"Content-Length" in names
    assert body == b'{"status":"ok"}'


def test_builtin_chat_formats_by_name():
    msgs = [
        {"role": "system", "content": "You are a test."},
        {"role": "user", "content": "Hi there"},
    ]
    t = ChatTemplate("command-r", use_jinja=False)  # llama.cpp's legacy formats (--no-jinja)
    assert t.render(msgs) == (
        "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|>"
        "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>"
        "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
    )
    assert (
        ChatTemplate("llama3", use_jinja=False)
        .render(msgs[1:], add_generation_prompt=False)
        .endswith("<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>")
    )
    chatml = ChatTemplate("chatml")  # with Jinja: llama.cpp's Jinja ChatML, as llama-server
    assert "<|im_start|>user\nHi there" in chatml.render(msgs)


def test_ignore_eos_bans_end_of_generation_tokens(server):
    body = {"prompt": "Hi", "n_predict": 4, "temperature": 0}
    settings = http.post(server + "/completion", json=body).json()["generation_settings"]
    assert settings["logit_bias"] == [] and settings["ignore_eos"] is False
    body["ignore_eos"] = True
    settings = http.post(server + "/completion", json=body).json()["generation_settings"]
    banned = {e["token"] for e in settings["logit_bias"]}
    assert 2 in banned  # SmolLM2's <|im_end|>
    assert all(e["bias"] is None for e in settings["logit_bias"])  # -inf is written as null
    assert settings["ignore_eos"] is True and settings["n_predict"] == 4


def test_a_context_shift_marks_the_result_truncated(smollm_path):
    from helpers.servers import running_server

    args = ("-m", smollm_path, "-t", "2", "-c", "256", "-np", "1", "--context-shift")
    with running_server(*args) as url:
        body = {"prompt": "Hello " * 200, "n_predict": 100, "temperature": 0, "ignore_eos": True}
        r = http.post(url + "/completion", json=body).json()
        assert r["tokens_predicted"] == 100 and r["truncated"] is True
        body["prompt"] = "Hello"
        assert http.post(url + "/completion", json=body).json()["truncated"] is False
