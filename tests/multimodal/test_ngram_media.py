"""n-gram speculation on prompts holding images: a medium's placeholders are in the slot's
history the drafters read, never in a draft (llama_decode refuses them), and the text is
plain decoding's."""

from __future__ import annotations

from pathlib import Path

import httpx

from helpers.media import b64, png
from helpers.servers import running_server

# ngram-simple on 1-grams with 8-token drafts: a sampled token seen just before the image
# makes the draft the image's opening text and then its first placeholder
NGRAM = ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1",
         "--spec-ngram-simple-size-m", "8")  # fmt: skip
HELLO = 33662  # " hello" in SmolLM2's vocabulary (the tiny model's)


def _complete(url: str) -> dict:
    marker = httpx.get(url + "/props").json()["media_marker"]
    body = {
        "prompt": {
            "prompt_string": f"x y z hello{marker} b",
            "multimodal_data": [b64(png(16, 16, seed=1))],
        },
        "n_predict": 24,
        "temperature": 0,
        "return_tokens": True,
        "logit_bias": [[HELLO, 100]],  # every sampled token is " hello"
    }
    r = httpx.post(url + "/completion", json=body, timeout=180)
    assert r.status_code == 200, r.text
    return r.json()


def test_drafts_stop_at_the_image(tiny_vlm: dict[str, Path]) -> None:
    args = ("-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj"]), "-c", "2048")
    with running_server(*args, "-np", "1") as url:
        plain = _complete(url)
    with running_server(*args, "-np", "1", *NGRAM) as url:
        drafted = _complete(url)
    assert drafted["tokens"] == plain["tokens"] == [HELLO] * 24
    assert drafted["timings"]["draft_n"] > 0 and drafted["timings"]["draft_n_accepted"] > 0
