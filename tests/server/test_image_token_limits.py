"""--image-min-tokens and --image-max-tokens act: with a projector whose image token count
follows the image's size (tests/fixtures/tiny_pixtral.py), the same image costs more prompt
tokens under a higher minimum and fewer under a lower maximum, and every count and greedy
reply equals llama-server's under the same flags."""

from __future__ import annotations

import httpx
import pytest

from fixtures.tiny_pixtral import image_tokens, write_pixtral_projector
from fixtures.tiny_vlm import write_text_model
from helpers.media import data_url, png
from helpers.peer import require_peer, running_peer
from helpers.servers import running_server

SMALL, WIDE = (64, 64), (200, 120)  # images: grown by a minimum, shrunk by a maximum


@pytest.fixture(scope="module")
def pixtral_files(tmp_path_factory: pytest.TempPathFactory, smollm_path: str) -> list[str]:
    out = tmp_path_factory.mktemp("tiny_pixtral")
    model = write_text_model(out / "model.gguf", tokenizer_source=smollm_path)
    mmproj = write_pixtral_projector(out / "mmproj-pixtral.gguf")
    return ["-m", str(model), "--mmproj", str(mmproj)]


def _usage(url: str) -> dict[tuple[int, int], tuple[int, str]]:
    """(prompt tokens, greedy reply) of one chat turn with each image."""
    out = {}
    for width, height in (SMALL, WIDE):
        image = {"type": "image_url", "image_url": {"url": data_url(png(width, height, seed=0))}}
        body = {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Describe"}, image]}
            ],
            "max_tokens": 8,
            "temperature": 0,
        }
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        d = r.json()
        out[(width, height)] = (d["usage"]["prompt_tokens"], d["choices"][0]["message"]["content"])
    return out


@pytest.mark.flag_effect("--image-min-tokens", "--image-max-tokens")
def test_image_token_bounds_change_the_prompt_as_llama_server(pixtral_files: list[str]) -> None:
    require_peer()
    common = [*pixtral_files, "-c", "2048", "-np", "1", "-t", "2"]
    cases = {
        "default": [],
        "min": ["--image-min-tokens", "64"],
        "max": ["--image-max-tokens", "16"],
    }
    ours, theirs = {}, {}
    for name, flags in cases.items():
        with running_server(*common, *flags) as url:
            ours[name] = _usage(url)
        with running_peer(*common, *flags) as url:
            theirs[name] = _usage(url)
    assert ours == theirs

    def tokens(case: str, image: tuple[int, int]) -> int:
        return ours[case][image][0]

    # 64x64 resizes to 70x70 (5x5 patches, 4 [IMG_BREAK]); at least 64 patches: 112x112
    assert tokens("min", SMALL) - tokens("default", SMALL) == (
        image_tokens(112, 112) - image_tokens(70, 70)
    )
    # 200x120 resizes to 196x126 (14x9 patches); at most 16 patches: 70x42 (5x3)
    assert tokens("default", WIDE) - tokens("max", WIDE) == (
        image_tokens(196, 126) - image_tokens(70, 42)
    )
    assert tokens("default", SMALL) - tokens("max", SMALL) == (
        image_tokens(70, 70) - image_tokens(56, 56)
    )
    assert tokens("min", WIDE) == tokens("default", WIDE)  # already above the minimum
