"""Router mode with multimodal models: a --models-dir folder holding a model and its
projector is served with it (the child gets --mmproj, as llama-server's router gives it),
/models reports the input modalities, requests with images and audio uploads are proxied
by their model; the hub cache's choice of a projector beside a model (find_best_mmproj)."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import openai

from pyllama import hub

from helpers.media import data_url, png, wav
from helpers.servers import running_server


def test_folder_projector_goes_to_the_child(tiny_vlm: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "models"
    (root / "tiny-vlm").mkdir(parents=True)
    (root / "tiny-vlm" / "model.gguf").symlink_to(tiny_vlm["model"])
    (root / "tiny-vlm" / "mmproj-omni.gguf").symlink_to(tiny_vlm["mmproj_omni"])
    (root / "tiny-text.gguf").symlink_to(tiny_vlm["model"])
    args = ["--models-dir", str(root), "--models-max", "1", "-c", "1024", "-np", "1", "-t", "2"]
    with running_server(*args) as url, openai.OpenAI(base_url=url + "/v1", api_key="x") as client:
        models = {m["id"]: m for m in httpx.get(url + "/models").json()["data"]}
        assert models["tiny-vlm"]["architecture"]["input_modalities"] == ["text", "image", "audio"]
        assert models["tiny-text"]["architecture"]["input_modalities"] == ["text"]
        parts = [
            {"type": "text", "text": "Describe this."},
            {"type": "image_url", "image_url": {"url": data_url(png(32, 32))}},
        ]
        r = client.chat.completions.create(
            model="tiny-vlm", messages=[{"role": "user", "content": parts}], max_tokens=4
        )
        assert r.choices[0].message.content
        f = io.BytesIO(wav(0.5))
        f.name = "a.wav"
        t = client.audio.transcriptions.create(
            model="tiny-vlm", file=f, extra_body={"max_tokens": 4}
        )
        assert t.text
        # the same file without its folder's projector: no images
        bad = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "tiny-text", "messages": [{"role": "user", "content": parts}]},
            timeout=120,
        )
        assert bad.status_code == 400
        assert "image input is not supported" in bad.json()["error"]["message"]
        missing = httpx.post(url + "/v1/audio/transcriptions", files={"file": ("a.wav", wav(0.2))})
        assert missing.status_code == 400
        assert "model name is missing" in missing.json()["error"]["message"]


def test_hub_projector_choice() -> None:
    files = [
        "model-Q4_K_M.gguf",
        "model-Q8_0.gguf",
        "mmproj-model-F16.gguf",
        "mmproj-model-Q8_0.gguf",
        "sub/model-Q4_K_M.gguf",
        "other/mmproj-x-Q4_0.gguf",
    ]
    assert hub.find_best_mmproj(files, "model-Q8_0.gguf") == "mmproj-model-Q8_0.gguf"
    assert hub.find_best_mmproj(files, "model-Q4_K_M.gguf") == "mmproj-model-Q8_0.gguf"
    # a folder's own projector first; one in a sibling folder never
    assert hub.find_best_mmproj(files, "sub/model-Q4_K_M.gguf") == "mmproj-model-Q8_0.gguf"
    assert (
        hub.find_best_mmproj(["a/model-Q4_0.gguf", "b/mmproj-Q4_0.gguf"], "a/model-Q4_0.gguf")
        is None
    )
    assert hub.find_best_mmproj(["model-Q4_0.gguf"], "model-Q4_0.gguf") is None
