"""POST /v1/audio/transcriptions with the openai client's audio.transcriptions.create on
the tiny audio model (llama-server's speech-to-text route): json, text and verbose_json,
streamed (its SSE events byte for byte as llama-server's), and what it refuses."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from helpers.media import png, wav
from helpers.peer import require_peer, running_peer
from helpers.servers import running_server


@pytest.fixture(scope="module")
def audio_server(tiny_vlm: dict[str, Path]) -> Iterator[str]:
    with running_server(
        "-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj_audio"]), "-c", "2048", "-np", "1",
    ) as url:  # fmt: skip
        yield url


def _file(data: bytes, name: str = "speech.wav") -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def test_transcription_json(audio_server: str) -> None:
    client = openai.OpenAI(base_url=audio_server + "/v1", api_key="none")
    out = client.audio.transcriptions.create(
        model="tiny", file=_file(wav(1.0)), temperature=0, extra_body={"max_tokens": 12}
    )
    assert out.text
    again = client.audio.transcriptions.create(
        model="tiny", file=_file(wav(1.0)), temperature=0, extra_body={"max_tokens": 12}
    )
    assert again.text == out.text
    other = client.audio.transcriptions.create(
        model="tiny", file=_file(wav(1.0, freq=0.0)), temperature=0, extra_body={"max_tokens": 12}
    )
    assert other.text != out.text  # what it "hears" depends on the sound
    assert out.usage is not None and out.usage.type == "tokens"
    assert out.usage.output_tokens == 12  # type: ignore[union-attr]


def test_transcription_formats(audio_server: str) -> None:
    client = openai.OpenAI(base_url=audio_server + "/v1", api_key="none")
    kw = {"model": "tiny", "temperature": 0, "extra_body": {"max_tokens": 6}}
    text = client.audio.transcriptions.create(file=_file(wav(1.0)), response_format="text", **kw)
    plain = client.audio.transcriptions.create(file=_file(wav(1.0)), **kw)
    assert isinstance(text, str) and text == plain.text
    verbose = client.audio.transcriptions.create(
        file=_file(wav(2.5)), response_format="verbose_json", language="en", **kw
    )
    assert verbose.duration == pytest.approx(2.5)
    assert verbose.language == "en"
    assert verbose.text


def test_transcription_route_aliases_and_prompt(audio_server: str) -> None:
    files = {"file": ("a.wav", wav(1.0), "audio/wav")}
    data = {
        "model": "tiny",
        "prompt": "Write down what is said",
        "temperature": "0",
        "max_tokens": "4",
    }
    a = httpx.post(audio_server + "/audio/transcriptions", files=files, data=data, timeout=60)
    b = httpx.post(audio_server + "/v1/audio/transcriptions", files=files, data=data, timeout=60)
    assert a.status_code == b.status_code == 200
    assert a.json()["text"] == b.json()["text"]
    assert a.json()["type"] == "transcript.text.done"


def test_transcription_stream(audio_server: str) -> None:
    """The openai client's streamed transcription: one delta event per generated token,
    then the done event with the whole text and the usage, as the unstreamed answer."""
    client = openai.OpenAI(base_url=audio_server + "/v1", api_key="none")
    kw = {"model": "tiny", "temperature": 0, "extra_body": {"max_tokens": 7}}
    whole = client.audio.transcriptions.create(file=_file(wav(1.2)), **kw)
    events = list(
        client.audio.transcriptions.create(file=_file(wav(1.2)), stream=True, **kw)  # type: ignore[call-overload]
    )
    *deltas, done = events
    assert [e.type for e in deltas] == ["transcript.text.delta"] * 7
    assert done.type == "transcript.text.done"
    assert "".join(e.delta for e in deltas) == done.text == whole.text
    assert done.usage.output_tokens == 7
    assert done.usage.input_tokens == whole.usage.input_tokens  # type: ignore[union-attr]


def _sse(url: str) -> list[bytes]:
    files = {"file": ("a.wav", wav(1.0, freq=330.0))}
    data = {"model": "tiny", "stream": "true", "temperature": "0", "max_tokens": "9"}
    with httpx.stream(
        "POST", url + "/v1/audio/transcriptions", files=files, data=data, timeout=120
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return [line for line in r.read().split(b"\n\n") if line]


def test_transcription_stream_equals_llama_server(tiny_vlm: dict[str, Path]) -> None:
    """The streamed events, byte for byte, on fresh servers (so no cached prompt): deltas,
    the done event, then ``data: [DONE]``."""
    require_peer()
    args = ["-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj_audio"])]
    args += ["-c", "2048", "-np", "1", "-t", "2"]
    with running_server(*args) as url:
        ours = _sse(url)
    with running_peer(*args) as url:
        theirs = _sse(url)
    assert ours[-1] == b"data: [DONE]"
    assert ours[-2].startswith(b'data: {"type":"transcript.text.done","text":')
    assert len(ours) == 9 + 2
    assert ours == theirs


@pytest.mark.parametrize(
    ("files", "data", "message"),
    [
        (
            {"audio": ("a.wav", wav(0.5))},
            {"model": "tiny"},
            "unsupported transcription field(s): audio",
        ),
        ({"file": ("a.wav", wav(0.5))}, {"response_format": "srt"}, "response_format 'srt'"),
        (
            {"file": ("a.wav", wav(0.5))},
            {"timestamp_granularities[]": "word"},
            "timestamp_granularities[]",
        ),
        (
            {"file": ("a.wav", wav(0.5))},
            {"stream": "true", "response_format": "text"},
            "response_format 'text' cannot be streamed",
        ),
        ({"file": ("a.wav", wav(0.5))}, {"stream": "yes"}, "'stream' must be true or false"),
        ({"file": ("a.wav", wav(0.5))}, {"temperature": "warm"}, "'temperature' must be a number"),
        ({"file": ("a.wav", b"not audio")}, {}, "could not be decoded"),
        ({"file": ("a.png", png(8, 8))}, {}, "image input is not supported"),
    ],
)
def test_transcription_refusals(audio_server: str, files: dict, data: dict, message: str) -> None:
    r = httpx.post(audio_server + "/v1/audio/transcriptions", files=files, data=data, timeout=60)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]["message"]


def test_no_file(audio_server: str) -> None:
    r = httpx.post(
        audio_server + "/v1/audio/transcriptions",
        files={"file": ("empty.wav", b"")},
        data={"model": "tiny"},
    )
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "No input file found for transcription"


def test_not_a_form(audio_server: str) -> None:
    r = httpx.post(audio_server + "/v1/audio/transcriptions", json={"file": "x"})
    assert r.status_code == 400
    assert "multipart/form-data" in r.json()["error"]["message"]
