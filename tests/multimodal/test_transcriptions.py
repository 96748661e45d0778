"""POST /v1/audio/transcriptions with the openai client's audio.transcriptions.create on
the tiny audio model (llama-server's speech-to-text route): json, text and verbose_json,
and what it refuses."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from helpers.media import png, wav
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
        ({"file": ("a.wav", wav(0.5))}, {"stream": "true"}, "streamed transcriptions"),
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
