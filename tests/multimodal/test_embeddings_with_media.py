"""Embeddings of prompts holding an image, on a generative model with its projector and
``--embeddings``, as llama-server serves them: the rows of the prompt's last batch (the
text after the image) with the model's own pooling (none: one raw row a token, which the
OpenAI route refuses), the pooled row with ``--pooling mean``; the same image gives the
same vectors, the text alone others."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from helpers.media import b64, png
from helpers.servers import running_server

IMAGE = b64(png(32, 32, seed=3))


@pytest.fixture(scope="module", params=[None, "mean"], ids=["model-pooling", "mean"])
def server(
    request: pytest.FixtureRequest, tiny_vlm: dict[str, Path]
) -> Iterator[tuple[str, str | None]]:
    args = ["-m", str(tiny_vlm["model"]), "--mmproj", str(tiny_vlm["mmproj"]), "--embeddings"]
    args += ["-c", "2048", "-b", "512", "-t", "2"]
    if request.param:
        args += ["--pooling", request.param]
    with running_server(*args) as url:
        yield url, request.param


def _prompt(url: str, image: bool) -> dict:
    marker = httpx.get(url + "/props", timeout=30).json()["media_marker"]
    text = f"What is this: {marker}\n"
    return {"prompt_string": text, "multimodal_data": [IMAGE]} if image else {"prompt_string": text}


def test_the_same_image_gives_the_same_vectors(server: tuple[str, str | None]) -> None:
    url, pooling = server
    with_image = _prompt(url, True)
    body = {"content": [with_image, with_image, _prompt(url, False)]}
    r = httpx.post(url + "/embeddings", json=body, timeout=120)
    assert r.status_code == 200, r.text
    a, b, text = (item["embedding"] for item in r.json())
    assert a == b
    assert a != text
    if pooling is None:  # a generative model's own pooling is none: a row a token
        assert len(a) > 1 and all(len(row) == len(a[0]) for row in a)
        assert abs(sum(x * x for x in a[0]) - 1) > 1e-3  # raw rows, not normalized
    else:
        assert len(a) == 1
        assert sum(x * x for x in a[0]) == pytest.approx(1, abs=1e-3)


def test_the_openai_route_takes_pooled_vectors_only(server: tuple[str, str | None]) -> None:
    url, pooling = server
    r = httpx.post(url + "/v1/embeddings", json={"input": [_prompt(url, True)]}, timeout=120)
    if pooling is None:
        assert r.status_code == 400
        assert "Pooling type 'none' is not OAI compatible" in r.json()["error"]["message"]
    else:
        assert r.status_code == 200, r.text
        assert len(r.json()["data"]) == 1
