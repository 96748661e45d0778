"""Images: with a projector (``/props`` modalities.vision) the attach button is enabled, a
picked image shows in the composer and in the sent message, and the server takes it as an
OpenAI ``image_url`` part (a bad image would be a 400 before the reply)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.tiny_vlm import write_all
from helpers.media import png
from helpers.servers import running_server


@pytest.fixture(scope="module")
def vision_server(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    files = write_all(tmp_path_factory.mktemp("webui-vlm"), tokenizer_source=smollm_path)
    args = ("-m", str(files["model"]), "--mmproj", str(files["mmproj"]), "-c", "2048", "-t", "1")
    with running_server(*args) as url:
        yield url


def test_an_image_is_attached_and_sent(page_of, vision_server: str, tmp_path: Path) -> None:
    image = tmp_path / "blocks.png"
    image.write_bytes(png(48, 48, seed=3))
    page = page_of(vision_server)
    page.open(settings={"sampling": {"max_tokens": "4"}, "extra": ""})
    assert page.find("#attach").get_attribute("disabled") is None
    page.find("#file-input").send_keys(str(image))
    page.wait(lambda: page.find_all("#attachments img.thumb"), 10, "the thumbnail")
    page.type_message("What is this?")
    reply = page.wait_reply()
    assert reply["text"] and not page.find("#messages article.msg.assistant .error").text
    sent = page.find_all("#messages article.msg.user img.thumb")
    assert len(sent) == 1 and sent[0].get_attribute("src").startswith("data:image/png;base64,")
    assert not page.find("#attachments").is_displayed()  # the composer is empty again
    stored = page.stored(page.conversation_id())["messages"][0]
    assert len(stored["images"]) == 1 and stored["content"] == "What is this?"
