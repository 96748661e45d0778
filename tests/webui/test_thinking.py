"""A thinking model's reply: the reasoning (``reasoning_content`` deltas) shows folded
above the answer and opens on a click, and is kept with the conversation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.servers import running_server
from helpers.thinking import THINKING_TEMPLATE, THOUGHT


@pytest.fixture(scope="module")
def thinker(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    template = Path(tmp_path_factory.mktemp("webui-think")) / "thinking.jinja"
    template.write_text(THINKING_TEMPLATE)
    args = ("-m", smollm_path, "-t", "1", "-c", "2048", "--chat-template-file", str(template))
    with running_server(*args) as url:
        yield url


def test_the_thinking_shows_folded(page_of, thinker: str) -> None:
    page = page_of(thinker)
    page.open(settings={"extra": json.dumps({"grammar": THOUGHT}), "sampling": {}})
    page.type_message("Weather in Paris?")
    reply = page.wait_reply()
    assert reply["text"] == "Paris is sunny."
    details = page.find("#messages article.msg.assistant details.thinking")
    assert details.is_displayed() and details.get_attribute("open") is None  # folded
    assert details.find_element("css selector", "summary").text == "Thoughts"
    body = details.find_element("css selector", ".thinking-body")
    assert not body.is_displayed()
    details.find_element("css selector", "summary").click()
    assert body.is_displayed() and body.text == "Plan: be brief."
    stored = page.stored(page.conversation_id())["messages"][-1]
    assert (stored["reasoning"].strip(), stored["content"].strip()) == (
        "Plan: be brief.",
        "Paris is sunny.",
    )
