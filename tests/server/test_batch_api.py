"""OpenAI's Files and Batch API on pyllama-server, driven by the real ``openai`` package as
its documentation shows it (upload, create, poll, download), on the demo model and the
embedding model; bad input failing as OpenAI fails it; a batch that survives ``kill -9``."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from helpers.servers import SERVER_PIDS, running_server

N_CHAT = 1000


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _chat_line(i: int, url: str = "/v1/chat/completions") -> dict[str, Any]:
    body = {
        "model": "demo",
        "messages": [{"role": "user", "content": f"Count to {i % 7 + 1}."}],
        "max_tokens": 8,
        "temperature": 0,
    }
    return {"custom_id": f"req-{i}", "method": "POST", "url": url, "body": body}


def _client(url: str, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=60)


def _wait(client: openai.OpenAI, batch_id: str, timeout: float = 900) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
        assert time.monotonic() < deadline, batch
        time.sleep(0.5)


def _run(client: openai.OpenAI, data: bytes, endpoint: str = "/v1/chat/completions") -> Any:
    upload = client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    batch = client.batches.create(
        input_file_id=upload.id, endpoint=endpoint, completion_window="24h",  # type: ignore[arg-type]
        metadata={"job": "test"},
    )  # fmt: skip
    assert batch.status == "validating" and batch.metadata == {"job": "test"}
    return _wait(client, batch.id)


def _started(client: openai.OpenAI, n: int, answered: int) -> Any:
    """A batch of ``n`` chat lines, once ``answered`` of them are."""
    data = _jsonl([_chat_line(i) for i in range(n)])
    upload = client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    batch = client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 120
    while client.batches.retrieve(batch.id).request_counts.completed < answered:  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return batch


def _answers(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    text = client.files.content(file_id).text
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def server(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d = tmp_path_factory.mktemp("batches")
    args = ("-m", smollm_path, "-t", "2", "-c", "2048", "-np", "4", "--batch-dir", str(d))
    with running_server(*args, "--batch-max-file-mib", "1") as url:
        yield url


def test_the_documented_flow_answers_every_line(server: str) -> None:
    client = _client(server)
    batch = _run(client, _jsonl([_chat_line(i) for i in range(N_CHAT)]))
    assert batch.status == "completed", batch
    assert batch.request_counts.total == N_CHAT and batch.request_counts.completed == N_CHAT
    assert batch.error_file_id is None
    out = _answers(client, batch.output_file_id)
    assert sorted(o["custom_id"] for o in out) == sorted(f"req-{i}" for i in range(N_CHAT))
    for o in out:
        assert o["response"]["status_code"] == 200 and o["error"] is None
        assert o["response"]["body"]["object"] == "chat.completion"
    # a line's answer is what the endpoint answers a client
    one = next(o for o in out if o["custom_id"] == "req-3")
    direct = httpx.post(server + "/v1/chat/completions", json=_chat_line(3)["body"], timeout=60)
    assert (
        one["response"]["body"]["choices"][0]["message"] == direct.json()["choices"][0]["message"]
    )
    listed = client.batches.list()
    assert batch.id in [b.id for b in listed.data]
    assert client.files.retrieve(batch.output_file_id).purpose == "batch_output"


def test_a_line_that_fails_fails_alone(server: str) -> None:
    client = _client(server)
    lines = [_chat_line(0), _chat_line(1)]
    lines[1]["body"]["messages"] = [{"role": "wizard", "content": "hi"}]  # a 400 when it runs
    batch = _run(client, _jsonl(lines))
    assert batch.status == "completed"
    assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 1)
    (ok,) = _answers(client, batch.output_file_id)
    (bad,) = _answers(client, batch.error_file_id)
    assert ok["custom_id"] == "req-0" and bad["custom_id"] == "req-1"
    assert bad["response"]["status_code"] == 400 and "error" in bad["response"]["body"]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b'{"custom_id": "a", "method": "POST"\n', "invalid_json_line"),
        (_jsonl([_chat_line(0, url="/v1/completions")]), "mismatched_endpoint"),
        (_jsonl([_chat_line(0), _chat_line(0)]), "duplicate_custom_id"),
        (b"\n\n", "empty_file"),
    ],
)
def test_a_bad_file_fails_validation_naming_its_lines(server: str, data: bytes, code: str) -> None:
    client = _client(server)
    batch = _run(client, data)
    assert batch.status == "failed" and batch.errors is not None
    assert [e.code for e in batch.errors.data] == [code]
    assert batch.errors.data[0].line in (1, 2)


def test_requests_that_cannot_be_taken_are_openai_errors(server: str) -> None:
    client = _client(server)
    with pytest.raises(openai.BadRequestError, match="input_file_id"):
        client.batches.create(
            input_file_id="file_missing", endpoint="/v1/chat/completions", completion_window="24h"
        )
    upload = client.files.create(file=("x.jsonl", io.BytesIO(b"{}\n")), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        client.batches.create(
            input_file_id=upload.id,
            endpoint="/v1/moderations",
            completion_window="24h",  # type: ignore[arg-type]
        )
    with pytest.raises(openai.BadRequestError, match="embeddings"):
        client.batches.create(
            input_file_id=upload.id, endpoint="/v1/embeddings", completion_window="24h"
        )
    with pytest.raises(openai.APIStatusError) as e:  # --batch-max-file-mib 1
        client.files.create(file=("big.jsonl", io.BytesIO(b"x" * (3 << 20))), purpose="batch")
    assert e.value.status_code == 413
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve("file_missing")
    assert client.files.delete(upload.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.content(upload.id)


def test_a_cancelled_batch_keeps_what_it_answered(server: str) -> None:
    client = _client(server)
    batch = _started(client, 400, 2)
    assert client.batches.cancel(batch.id).status == "cancelling"
    done = _wait(client, batch.id)
    assert done.status == "cancelled"
    out = _answers(client, done.output_file_id)
    assert 2 <= len(out) < 400 and len(out) == done.request_counts.completed


def test_an_embeddings_batch(minilm_path: str, tmp_path: Path) -> None:
    args = ("-m", minilm_path, "--embeddings", "-t", "2", "--batch-dir", str(tmp_path))
    with running_server(*args) as url:
        client = _client(url)
        lines = [
            {"custom_id": f"e{i}", "method": "POST", "url": "/v1/embeddings",
             "body": {"model": "m", "input": f"sentence number {i}"}}
            for i in range(50)
        ]  # fmt: skip
        batch = _run(client, _jsonl(lines), endpoint="/v1/embeddings")
        assert batch.status == "completed" and batch.request_counts.completed == 50
        out = _answers(client, batch.output_file_id)
        assert len(out) == 50
        assert all(len(o["response"]["body"]["data"][0]["embedding"]) == 384 for o in out)


def test_a_batch_expires_after_its_window(smollm_path: str, tmp_path: Path) -> None:
    args = ("-m", smollm_path, "-t", "2", "-np", "2", "--batch-dir", str(tmp_path))
    with running_server(*args, "--batch-window", "3") as url:
        client = _client(url)
        batch = _run(client, _jsonl([_chat_line(i) for i in range(2000)]))
        assert batch.status == "expired"
        out = _answers(client, batch.output_file_id)
        late = _answers(client, batch.error_file_id)
        assert len(out) + len(late) == 2000
        assert all(o["error"]["code"] == "batch_expired" for o in late) and late


def test_keys_see_only_their_own(smollm_path: str, tmp_path: Path) -> None:
    args = ("-m", smollm_path, "-t", "2", "--api-key", "alpha,beta", "--batch-dir", str(tmp_path))
    with running_server(*args) as url:
        a, b = _client(url, "alpha"), _client(url, "beta")
        upload = a.files.create(
            file=("x.jsonl", io.BytesIO(_jsonl([_chat_line(0)]))), purpose="batch"
        )
        assert upload.id in [f.id for f in a.files.list()]
        assert upload.id not in [f.id for f in b.files.list()]
        with pytest.raises(openai.NotFoundError):
            b.files.retrieve(upload.id)
        with pytest.raises(openai.BadRequestError):
            b.batches.create(
                input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
            )


def test_kill_9_mid_batch_then_restart_answers_each_line_once(
    smollm_path: str, tmp_path: Path
) -> None:
    args = ("-m", smollm_path, "-t", "2", "-np", "2", "--batch-dir", str(tmp_path))
    n = 120
    with running_server(*args) as url:
        batch = _started(_client(url), n, 10)
        os.kill(SERVER_PIDS[url], signal.SIGKILL)
    with running_server(*args) as url:
        client = _client(url)
        done = _wait(client, batch.id)
        assert done.status == "completed" and done.request_counts.completed == n
        out = _answers(client, done.output_file_id)
        ids = [o["custom_id"] for o in out]
        assert sorted(ids) == sorted(f"req-{i}" for i in range(n))  # each once


def test_two_servers_share_one_directory(smollm_path: str, tmp_path: Path) -> None:
    """Replicas on one --batch-dir: a batch created on either is run once, by the one that
    holds the directory's runner lock, and both see it finish."""
    args = ("-m", smollm_path, "-t", "1", "-np", "2", "--batch-dir", str(tmp_path))
    with running_server(*args) as first, running_server(*args) as second:
        a, b = _client(first), _client(second)
        batch = _run(b, _jsonl([_chat_line(i) for i in range(20)]))
        assert batch.status == "completed" and batch.request_counts.completed == 20
        assert a.batches.retrieve(batch.id).status == "completed"
        assert len(_answers(a, batch.output_file_id)) == 20


def test_the_batch_flags(smollm_path: str, tmp_path: Path) -> None:
    """--batch-max-lines fails a longer file; --batch-parallel 1 keeps one line in a slot at
    a time though four slots are free; --no-batch serves no batch API."""
    args = ("-m", smollm_path, "-t", "2", "-np", "4", "--batch-dir", str(tmp_path))
    with running_server(*args, "--batch-max-lines", "30", "--batch-parallel", "1") as url:
        client = _client(url)
        too_many = _run(client, _jsonl([_chat_line(i) for i in range(31)]))
        assert [e.code for e in too_many.errors.data] == ["too_many_requests"]  # type: ignore[union-attr]
        upload = client.files.create(
            file=("in.jsonl", io.BytesIO(_jsonl([_chat_line(i) for i in range(30)]))),
            purpose="batch",
        )
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        busy = set()
        while client.batches.retrieve(batch.id).status != "completed":
            slots = httpx.get(url + "/slots", timeout=30).json()
            busy.add(sum(1 for s in slots if s["is_processing"]))
        assert max(busy) == 1, busy
    with running_server(*args, "--no-batch") as url:
        r = httpx.get(url + "/v1/batches", timeout=30)
        assert r.status_code == 404 and "off on this server" in r.json()["error"]["message"]


def test_a_request_priority_is_an_integer(server: str) -> None:
    """``priority`` (lower first; the engine's admission order, tests/engine) on a request:
    an integer is taken, anything else is a 400 naming it."""
    body = {**_chat_line(0)["body"], "priority": -5}
    assert httpx.post(server + "/v1/chat/completions", json=body, timeout=60).status_code == 200
    r = httpx.post(server + "/v1/chat/completions", json={**body, "priority": "high"}, timeout=60)
    assert r.status_code == 400 and "priority" in r.json()["error"]["message"]
