"""llama-cpp-python's multimodal chat handlers in-process: ``Llama(chat_handler=
MTMDChatHandler(clip_model_path=...))`` answers image and audio chats as pyllama-server
with ``--mmproj`` answers them on the same tiny model and settings (``Llama``'s default
``flash_attn=False`` is the server's ``-fa off``; greedy: the same text, the same prompt
size), streamed or not; media from a file path too."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pyllama.compat.llama_cpp import Llama
from pyllama.compat.llama_cpp.chat_format import Llava15ChatHandler, MTMDChatHandler

from helpers.media import b64, data_url, png, wav
from helpers.servers import running_server

CHATS = [
    [
        {"type": "text", "text": "Describe this."},
        {"type": "image_url", "image_url": {"url": data_url(png(64, 64, seed=0))}},
    ],
    [
        {"type": "image_url", "image_url": {"url": data_url(png(97, 41, seed=1))}},
        {"type": "text", "text": "What is it?"},
        {"type": "image_url", "image_url": {"url": data_url(png(32, 32, seed=2))}},
    ],
    [
        {"type": "text", "text": "Listen."},
        {"type": "input_audio", "input_audio": {"data": b64(wav(1.5)), "format": "wav"}},
    ],
]


def _server_replies(tiny_vlm: dict[str, Path]) -> list[tuple[str, int]]:
    args = ["-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj_omni"]),
            "-c", "2048", "-np", "1", "-t", "2", "--temp", "0", "-fa", "off"]  # fmt: skip
    out = []
    with running_server(*args) as url:
        for parts in CHATS:
            body = {"messages": [{"role": "user", "content": parts}], "max_tokens": 24,
                    "temperature": 0}  # fmt: skip
            r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
            assert r.status_code == 200, r.text
            d = r.json()
            out.append((d["choices"][0]["message"]["content"], d["usage"]["prompt_tokens"]))
    return out


def test_the_handler_answers_as_the_server(tiny_vlm: dict[str, Path]) -> None:
    handler = MTMDChatHandler(clip_model_path=str(tiny_vlm["mmproj_omni"]), verbose=False)
    llm = Llama(str(tiny_vlm["model"]), n_ctx=2048, n_threads=2, chat_handler=handler,
                verbose=False)  # fmt: skip
    ours = []
    for parts in CHATS:
        messages = [{"role": "user", "content": parts}]
        reply = llm.create_chat_completion(messages=messages, max_tokens=24, temperature=0)
        text = reply["choices"][0]["message"]["content"]
        ours.append((text, reply["usage"]["prompt_tokens"]))
        chunks = llm.create_chat_completion(
            messages=messages, max_tokens=24, temperature=0, stream=True
        )
        assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == text
    handler.close()
    assert ours == _server_replies(tiny_vlm)


def test_media_from_a_file_path(tiny_vlm: dict[str, Path], tmp_path: Path) -> None:
    picture = tmp_path / "picture.png"
    picture.write_bytes(png(64, 64, seed=0))
    handler = MTMDChatHandler(clip_model_path=str(tiny_vlm["mmproj_omni"]), verbose=False)
    llm = Llama(str(tiny_vlm["model"]), n_ctx=2048, chat_handler=handler, verbose=False)

    def ask(url: str) -> str:
        parts = [{"type": "text", "text": "Describe this."},
                 {"type": "image_url", "image_url": {"url": url}}]  # fmt: skip
        reply = llm.create_chat_completion(
            messages=[{"role": "user", "content": parts}], max_tokens=8, temperature=0
        )
        return reply["choices"][0]["message"]["content"]

    assert ask(str(picture)) == ask(picture.as_uri()) == ask(data_url(png(64, 64, seed=0)))
    handler.close()


def test_llava15_lays_out_its_own_prompt(tiny_vlm: dict[str, Path]) -> None:
    handler = Llava15ChatHandler(clip_model_path=str(tiny_vlm["mmproj_omni"]), verbose=False)
    llm = Llama(str(tiny_vlm["model"]), n_ctx=2048, chat_handler=handler, verbose=False)
    parts = [{"type": "text", "text": "Hi"}]
    reply = llm.create_chat_completion(
        messages=[{"role": "user", "content": parts}], max_tokens=4, temperature=0
    )
    prompt = "USER: Hi\nASSISTANT:"
    assert reply["usage"]["prompt_tokens"] == len(llm.tokenize(prompt.encode(), special=True))
    handler.close()


def test_media_without_a_projector_is_refused(tiny_vlm: dict[str, Path]) -> None:
    llm = Llama(str(tiny_vlm["model"]), n_ctx=512, verbose=False)
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[1\]"):
        llm.create_chat_completion(messages=[{"role": "user", "content": CHATS[0]}])
    with pytest.raises(ValueError, match="Clip model path does not exist"):
        MTMDChatHandler(clip_model_path=str(tiny_vlm["model"]) + ".missing")
