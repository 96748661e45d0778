"""Slot files in llama-server's packed form (csrc/engine/slot_tokens.cpp): a slot holding an
image saves its tokens and the image's chunk, restores in a new process with the image's
KV reused, and fails cleanly (400, the slot still usable) on a server without a projector;
a plain token list (older files) still restores."""

from __future__ import annotations

import struct
from pathlib import Path

import httpx
import pytest

from helpers.media import b64, png
from helpers.servers import running_server

HEADER = 12  # llama_state_seq_save_file: magic, version, token count
IMAGE = b64(png(48, 48, seed=5))


def _prompt(url: str) -> dict:
    marker = httpx.get(url + "/props", timeout=30).json()["media_marker"]
    text = f"Look at this: {marker}\nNow describe the colours you see in it."
    return {"prompt_string": text, "multimodal_data": [IMAGE]}


def _args(tiny_vlm: dict[str, Path], slots: Path, mmproj: bool = True) -> list[str]:
    args = ["-m", str(tiny_vlm["model"]), "-c", "2048", "-np", "2", "-t", "2"]
    args += ["--slot-save-path", str(slots)]
    return args + (["--mmproj", str(tiny_vlm["mmproj"])] if mmproj else [])


def _complete(url: str, prompt: object, slot: int) -> dict:
    body = {
        "prompt": prompt,
        "n_predict": 6,
        "temperature": 0,
        "id_slot": slot,
        "cache_prompt": True,
    }
    r = httpx.post(url + "/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _slot(url: str, slot: int, action: str, name: str) -> httpx.Response:
    return httpx.post(f"{url}/slots/{slot}?action={action}", json={"filename": name}, timeout=120)


def test_a_slot_with_an_image_saves_and_restores_in_a_new_process(
    tiny_vlm: dict[str, Path], tmp_path: Path
) -> None:
    with running_server(*_args(tiny_vlm, tmp_path)) as url:
        first = _complete(url, _prompt(url), 0)
        n_full = first["timings"]["prompt_n"] + first["timings"]["cache_n"]
        saved = _slot(url, 0, "save", "image.bin")
        assert saved.status_code == 200, saved.text
        n_saved = saved.json()["n_saved"]

    data = (tmp_path / "image.bin").read_bytes()
    n_words = struct.unpack_from("=I", data, HEADER - 4)[0]
    marker, version, n_tokens = struct.unpack_from("=iII", data, HEADER)
    assert (marker, version, n_tokens) == (-1, 1, n_saved)
    tokens = struct.unpack_from(f"={n_tokens}i", data, HEADER + 12)
    n_media = struct.unpack_from("=I", data, HEADER + 12 + 4 * n_tokens)[0]
    assert n_media == 1
    start = struct.unpack_from("=I", data, HEADER + 16 + 4 * n_tokens)[0]
    assert tokens[start] == -1 and tokens[start - 1] >= 0  # the image's tokens are nulls
    assert n_words > n_tokens + 5  # the image's chunk travels in the list

    with running_server(*_args(tiny_vlm, tmp_path)) as url:
        restored = _slot(url, 1, "restore", "image.bin")
        assert restored.status_code == 200, restored.text
        assert restored.json()["n_restored"] == n_saved
        again = _complete(url, _prompt(url), 1)
        assert again["timings"]["cache_n"] == n_full - 1  # the image's KV was reused
        assert again["timings"]["prompt_n"] == 1
        assert again["content"] == first["content"]


def test_restoring_media_without_a_projector_is_a_400(
    tiny_vlm: dict[str, Path], tmp_path: Path
) -> None:
    with running_server(*_args(tiny_vlm, tmp_path)) as url:
        _complete(url, _prompt(url), 0)
        assert _slot(url, 0, "save", "image.bin").status_code == 200
    with running_server(*_args(tiny_vlm, tmp_path, mmproj=False)) as url:
        r = _slot(url, 0, "restore", "image.bin")
        assert r.status_code == 400
        assert "Cannot restore media tokens without an mmproj" in r.json()["error"]["message"]
        _complete(url, "The quick brown fox", 0)  # the slot is still usable


@pytest.mark.parametrize("slot", [0, 1])
def test_a_plain_token_list_still_restores(
    tiny_vlm: dict[str, Path], tmp_path: Path, slot: int
) -> None:
    with running_server(*_args(tiny_vlm, tmp_path)) as url:
        _complete(url, "What is the capital of France?", 0)
        saved = _slot(url, 0, "save", "text.bin").json()["n_saved"]
        path = tmp_path / "text.bin"
        data = bytearray(path.read_bytes())
        n_words = struct.unpack_from("=I", data, HEADER - 4)[0]
        n_tokens = struct.unpack_from("=I", data, HEADER + 8)[0]
        assert n_tokens == saved
        plain = data[HEADER + 12 : HEADER + 12 + 4 * n_tokens]
        data = data[:HEADER] + plain + data[HEADER + 4 * n_words :]
        struct.pack_into("=I", data, HEADER - 4, n_tokens)
        path.write_bytes(bytes(data))
        r = _slot(url, slot, "restore", "text.bin")
        assert r.status_code == 200, r.text
        assert r.json()["n_restored"] == saved
        again = _complete(url, "What is the capital of Germany?", slot)
        assert again["timings"]["cache_n"] > 0
