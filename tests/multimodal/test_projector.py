"""pyllama._core.Projector (libmtmd) on the tiny model: modalities, tokenization into
placeholder tokens and media chunks, refusals of bad media, and the engine decoding a
media prompt."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from pyllama import _core
from pyllama.engine import default_threads

from fixtures.tiny_vlm import AUDIO_TOKENS, IMAGE_TOKENS
from helpers.media import png, wav


@pytest.fixture(scope="module")
def model(tiny_vlm: dict[str, Path]) -> _core.Model:
    return _core.Model(str(tiny_vlm["model"]))


@pytest.fixture(scope="module")
def omni(model: _core.Model, tiny_vlm: dict[str, Path]) -> _core.Projector:
    return _core.Projector(model, str(tiny_vlm["mmproj_omni"]), n_threads=2)


def test_modalities(model: _core.Model, tiny_vlm: dict[str, Path]) -> None:
    vision = _core.Projector(model, str(tiny_vlm["mmproj"]), warmup=False)
    audio = _core.Projector(model, str(tiny_vlm["mmproj_audio"]), warmup=False)
    assert (vision.vision, vision.audio) == (True, False)
    assert (audio.vision, audio.audio, audio.audio_sample_rate) == (False, True, 16000)
    assert not vision.mrope
    assert vision.marker == _core.default_media_marker() == "<__media__>"
    assert _core.projector_caps(str(tiny_vlm["mmproj_omni"])) == (True, True)
    assert _core.projector_caps(str(tiny_vlm["mmproj_audio"])) == (False, True)


def test_tokenize_places_media_chunks(omni: _core.Projector, model: _core.Model) -> None:
    text = "Look: <__media__> and listen: <__media__> done"
    p = omni.tokenize(text, [png(32, 32, seed=3), wav(0.5)])
    assert [(m.audio, m.n_tokens) for m in p.media] == [(False, IMAGE_TOKENS), (True, AUDIO_TOKENS)]
    tokens = list(p.tokens)
    for m in p.media:
        span = tokens[m.start : m.start + m.n_tokens]
        assert all(t < -1 for t in span)  # placeholders: never a vocabulary id
        assert len(m.id) == 64  # SHA-256 hex of the file
    text_tokens = [t for t in tokens if t >= 0]
    assert len(text_tokens) == len(tokens) - IMAGE_TOKENS - AUDIO_TOKENS
    assert all(t < model.n_vocab for t in text_tokens)
    assert p.seconds == [0.0, pytest.approx(0.5)]


def test_same_file_same_placeholders(omni: _core.Projector) -> None:
    a = omni.tokenize("<__media__> x", [png(32, 32, seed=1)])
    b = omni.tokenize("<__media__> x", [png(32, 32, seed=1)])
    c = omni.tokenize("<__media__> x", [png(32, 32, seed=2)])
    assert list(a.tokens) == list(b.tokens)
    ia, ic = a.media[0], c.media[0]
    span = slice(ia.start, ia.start + ia.n_tokens)
    assert ia.id != ic.id
    # different images differ at every placeholder: a shared prefix stops at the image
    assert all(x != y for x, y in zip(a.tokens[span], c.tokens[span]))


def _bad_png() -> bytes:
    good = png(32, 32, seed=1)
    return good[: len(good) // 2]  # truncated


def _wide_png(width: int, height: int) -> bytes:
    """A valid PNG header for a huge image (the pixel data is never read)."""
    import struct

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\x00" + b"\x00" * 3 * width
    idat = zlib.compress(row * min(height, 2))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.mark.parametrize(
    ("files", "text", "message"),
    [
        ([b"not an image at all"], "<__media__>", "could not be decoded"),
        ([_bad_png()], "<__media__>", "could not be decoded"),
        ([_wide_png(20000, 10)], "<__media__>", "20000x10 pixels"),
        ([png(8, 8)], "no marker here", r"0 media marker\(s\)"),
        ([b""], "<__media__>", "is empty"),
    ],
)
def test_bad_media_is_media_error(
    omni: _core.Projector, files: list[bytes], text: str, message: str
) -> None:
    with pytest.raises(_core.MediaError, match=message):
        omni.tokenize(text, files)


def test_image_needs_a_vision_projector(model: _core.Model, tiny_vlm: dict[str, Path]) -> None:
    audio = _core.Projector(model, str(tiny_vlm["mmproj_audio"]), warmup=False)
    with pytest.raises(_core.MediaError, match="image input is not supported"):
        audio.tokenize("<__media__>", [png(8, 8)])


def test_projector_for_another_model_is_refused(
    omni: _core.Projector, tiny_vlm: dict[str, Path]
) -> None:
    other = _core.Model(str(tiny_vlm["model"]))
    with pytest.raises(ValueError, match="another model"):
        _core.Engine(other, n_ctx=512, projector=omni)


def _greedy(engine: _core.Engine, prompt: _core.MediaPrompt, n: int = 8) -> list[int]:
    t = _core.TaskParams()
    t.set_prompt(prompt)
    t.n_predict = n
    greedy = _core.SamplingParams()
    greedy.temperature = 0.0
    t.sampling = greedy
    tid = engine.submit(t)
    out: list[int] = []
    while True:
        for ev in engine.wait(tid, 60000):
            assert ev.type != "error", ev.message
            if ev.type == "token":
                out.append(ev.token)
            if ev.done:
                return out


def test_engine_decodes_media_prompts(model: _core.Model, omni: _core.Projector) -> None:
    engine = _core.Engine(
        model, n_ctx=1024, n_parallel=2, n_threads=default_threads(), projector=omni
    )
    try:
        a = omni.tokenize("Describe <__media__> please.", [png(48, 48, seed=0)])
        b = omni.tokenize("Describe <__media__> please.", [png(48, 48, seed=1)])
        first = _greedy(engine, a)
        assert len(first) == 8
        assert _greedy(engine, a) == first  # again, from the slot's cache: the same tokens
        assert _greedy(engine, b) != first  # the image changes what the model says
        # placeholders outside a media chunk are not tokens
        bare = _core.TaskParams()
        bare.prompt = list(a.tokens)
        with pytest.raises(IndexError, match="outside the vocabulary"):
            engine.submit(bare)
    finally:
        engine.stop()


def test_engine_without_projector_refuses_media(model: _core.Model, omni: _core.Projector) -> None:
    engine = _core.Engine(model, n_ctx=512)
    try:
        t = _core.TaskParams()
        t.set_prompt(omni.tokenize("<__media__> hi", [png(16, 16)]))
        with pytest.raises(ValueError, match="multimodal data is not supported"):
            engine.submit(t)
    finally:
        engine.stop()
