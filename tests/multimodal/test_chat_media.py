"""Images and audio through every protocol on one pyllama-server (the tiny model with the
image and audio projector), with the official clients where there is one: OpenAI chat
(data URLs, input_audio), Anthropic image blocks, OpenAI Responses input_image, Ollama
images, llama-server's /completion multimodal_data; and the prompt cache across turns."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator

import anthropic
import httpx
import ollama
import openai
import pytest

from fixtures.tiny_vlm import IMAGE_TOKENS
from helpers.media import b64, data_url, png, wav

ASK = "Describe this."


_CLIENTS: dict[str, openai.OpenAI] = {}


@pytest.fixture(autouse=True, scope="module")
def _close_clients() -> Iterator[None]:
    yield
    for client in _CLIENTS.values():
        client.close()
    _CLIENTS.clear()


def _oai(url: str) -> openai.OpenAI:
    if url not in _CLIENTS:
        _CLIENTS[url] = openai.OpenAI(base_url=url + "/v1", api_key="none")
    return _CLIENTS[url]


def _image_chat(url: str, image: bytes, **kw: object) -> openai.types.chat.ChatCompletion:
    return _oai(url).chat.completions.create(
        model="tiny",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": ASK},
                    {"type": "image_url", "image_url": {"url": data_url(image)}},
                ],
            }
        ],
        max_tokens=12,
        temperature=0,
        **kw,  # type: ignore[arg-type]
    )


def test_props_and_models_report_modalities(omni_server: str) -> None:
    props = httpx.get(omni_server + "/props").json()
    # video: vision, and the ffmpeg and ffprobe programs to decode it with (test_video.py)
    video = shutil.which("ffmpeg") is not None and shutil.which("ffprobe") is not None
    assert props["modalities"] == {"vision": True, "audio": True, "video": video}
    assert re.fullmatch(r"<__media_[0-9A-Za-z]{32}__>", props["media_marker"])
    models = httpx.get(omni_server + "/v1/models").json()
    assert models["models"][0]["capabilities"] == ["completion", "multimodal"]
    name = httpx.get(omni_server + "/api/tags").json()["models"][0]["name"]
    caps = httpx.post(omni_server + "/api/show", json={"model": name}).json()["capabilities"]
    assert {"vision", "audio"} <= set(caps)


def test_openai_image_chat(omni_server: str) -> None:
    a = _image_chat(omni_server, png(64, 64, seed=0), extra_body={"cache_prompt": False})
    b = _image_chat(omni_server, png(64, 64, seed=1), extra_body={"cache_prompt": False})
    again = _image_chat(omni_server, png(64, 64, seed=0), extra_body={"cache_prompt": False})
    assert a.choices[0].message.content
    assert a.choices[0].message.content == again.choices[0].message.content
    assert a.choices[0].message.content != b.choices[0].message.content  # the image matters
    assert a.usage is not None
    assert a.usage.prompt_tokens > IMAGE_TOKENS


def test_repeated_image_comes_from_the_cache(omni_server: str) -> None:
    image = png(40, 40, seed=7)
    first = _image_chat(omni_server, image, extra_body={"id_slot": 1})
    second = _image_chat(omni_server, image, extra_body={"id_slot": 1})
    assert first.choices[0].message.content == second.choices[0].message.content
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached >= second.usage.prompt_tokens - 1  # the image too
    # another image at the same place: the cache keeps only the text before it
    third = _image_chat(omni_server, png(40, 40, seed=8), extra_body={"id_slot": 1})
    assert third.usage is not None and third.usage.prompt_tokens_details is not None
    assert (
        third.usage.prompt_tokens_details.cached_tokens or 0
    ) < third.usage.prompt_tokens - IMAGE_TOKENS


def test_conversation_keeping_an_image_keeps_its_cache(omni_server: str) -> None:
    turn1 = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": data_url(png(48, 48, seed=4))}},
                {"type": "text", "text": ASK},
            ],
        }
    ]
    client = _oai(omni_server)
    r1 = client.chat.completions.create(
        model="tiny", messages=turn1, max_tokens=6, temperature=0, extra_body={"id_slot": 0}
    )
    turn2 = [
        *turn1,
        {"role": "assistant", "content": r1.choices[0].message.content or ""},
        {"role": "user", "content": "And then?"},
    ]
    r2 = client.chat.completions.create(
        model="tiny", messages=turn2, max_tokens=6, temperature=0, extra_body={"id_slot": 0}
    )
    assert r2.usage is not None and r2.usage.prompt_tokens_details is not None
    assert r1.usage is not None
    cached = r2.usage.prompt_tokens_details.cached_tokens or 0
    assert cached >= r1.usage.prompt_tokens - 1  # the first turn, its image included


def test_openai_audio_chat(omni_server: str) -> None:
    def ask(sound: bytes) -> str | None:
        r = _oai(omni_server).chat.completions.create(
            model="tiny",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {
                            "type": "input_audio",
                            "input_audio": {"data": b64(sound), "format": "wav"},
                        },
                    ],
                }
            ],
            max_tokens=10,
            temperature=0,
            extra_body={"cache_prompt": False},
        )
        return r.choices[0].message.content

    tone = ask(wav(1.0, freq=440.0))
    assert tone
    assert tone == ask(wav(1.0, freq=440.0))
    assert tone != ask(wav(1.0, freq=0.0))  # silence is heard differently


def test_streamed_image_chat(omni_server: str) -> None:
    stream = _oai(omni_server).chat.completions.create(
        model="tiny",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": ASK},
                    {"type": "image_url", "image_url": {"url": data_url(png(64, 64, seed=0))}},
                ],
            }
        ],
        max_tokens=12,
        temperature=0,
        stream=True,
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == _image_chat(omni_server, png(64, 64, seed=0)).choices[0].message.content


def test_anthropic_image_block(omni_server: str) -> None:
    with anthropic.Anthropic(base_url=omni_server, api_key="none") as client:
        msg = client.messages.create(
            model="tiny",
            max_tokens=12,
            extra_body={"temperature": 0},
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": ASK},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": b64(png(64, 64, seed=0)),
                            },
                        },
                    ],
                }
            ],
        )
    block = msg.content[0]
    assert block.type == "text"
    assert block.text == _image_chat(omni_server, png(64, 64, seed=0)).choices[0].message.content


def test_responses_input_image(omni_server: str) -> None:
    r = _oai(omni_server).responses.create(
        model="tiny",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": ASK},
                    {
                        "type": "input_image",
                        "image_url": data_url(png(64, 64, seed=0)),
                        "detail": "auto",
                    },
                ],
            }
        ],
        max_output_tokens=12,
        temperature=0,
    )
    assert r.output_text == _image_chat(omni_server, png(64, 64, seed=0)).choices[0].message.content


def test_ollama_images(omni_server: str) -> None:
    options = {"temperature": 0, "num_predict": 8}
    with ollama.Client(host=omni_server) as client:
        a = client.chat(
            model="tiny",
            messages=[{"role": "user", "content": ASK, "images": [png(64, 64, seed=0)]}],
            options=options,
        )
        b = client.chat(
            model="tiny",
            messages=[{"role": "user", "content": ASK, "images": [png(64, 64, seed=1)]}],
            options=options,
        )
        gen = client.generate(
            model="tiny", prompt=ASK, images=[png(64, 64, seed=0)], options=options
        )
    assert a.message.content and a.message.content != b.message.content
    assert gen.response == a.message.content  # the same chat prompt


def test_completion_multimodal_data(omni_server: str) -> None:
    marker = httpx.get(omni_server + "/props").json()["media_marker"]

    def complete(image: bytes) -> dict:
        body = {
            "prompt": {
                "prompt_string": f"A picture: {marker} shows",
                "multimodal_data": [b64(image)],
            },
            "n_predict": 8,
            "temperature": 0,
            "cache_prompt": False,
        }
        r = httpx.post(omni_server + "/completion", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()

    a, b = complete(png(32, 32, seed=0)), complete(png(32, 32, seed=1))
    assert a["content"] != b["content"]
    assert a["tokens_evaluated"] > IMAGE_TOKENS


@pytest.mark.parametrize(
    "route", ["/v1/chat/completions/input_tokens", "/v1/messages/count_tokens"]
)
def test_token_counts_include_the_image(omni_server: str, route: str) -> None:
    parts = [
        {"type": "text", "text": ASK},
        {"type": "image_url", "image_url": {"url": data_url(png(16, 16))}},
    ]
    if "messages" in route:
        parts[1] = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b64(png(16, 16))},
        }
    r = httpx.post(
        omni_server + route,
        json={"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": parts}]},
    )
    assert r.status_code == 200, r.text
    text_only = httpx.post(
        omni_server + route,
        json={"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": ASK}]},
    ).json()["input_tokens"]
    assert r.json()["input_tokens"] >= text_only + IMAGE_TOKENS
