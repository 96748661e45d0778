"""Router mode: the page lists the router's models with their status, loads the picked one
on demand (showing the load as it goes), then chats with it; the reply's resumable stream
is found through the router."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from helpers.router import statuses
from helpers.servers import running_server


@pytest.fixture(scope="module")
def router(smollm_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d = tmp_path_factory.mktemp("webui-router")
    (d / "smol-a.gguf").symlink_to(smollm_path)
    (d / "smol-b.gguf").symlink_to(smollm_path)
    cache = tmp_path_factory.mktemp("webui-router-cache")  # no hub models: just these two
    args = ("--models-dir", str(d), "-t", "1", "-c", "2048", "-np", "1")
    env = {"LLAMA_CACHE": str(cache), "PYLLAMA_CACHE": str(cache)}  # nor pyllama models
    with running_server(*args, env=env) as url:
        yield url


def test_the_page_picks_loads_and_chats_with_a_model(page_of, router: str) -> None:
    page = page_of(router)
    page.open(settings={"sampling": {"max_tokens": "6"}, "extra": ""})
    options = page.js(
        "return [...document.querySelectorAll('#model-select option')].map((o) => o.textContent)"
    )
    assert options == ["smol-a (unloaded)", "smol-b (unloaded)"]
    assert not page.find("#model-name").is_displayed()
    from selenium.webdriver.support.select import Select

    Select(page.find("#model-select")).select_by_value("smol-b")
    page.wait(lambda: "smol-b" in page.find("#model-status").text, 10, "the load shown")
    page.wait(lambda: statuses(router)["smol-b"] == "loaded", 120, "smol-b loaded")
    page.wait(lambda: page.find("#model-status").text == "", 10, "the load done")
    assert page.js("return document.getElementById('model-select').value") == "smol-b"
    assert statuses(router)["smol-a"] == "unloaded"
    page.type_message("Hi")
    reply = page.wait_reply()
    assert "/2048" in reply["stats"]  # the child's n_ctx, from /props?model=
    conv_id = page.conversation_id()
    found = httpx.post(
        router + "/v1/streams/lookup", json={"conversation_ids": [f"{conv_id}::smol-b"]}
    ).json()
    assert [s["conversation_id"] for s in found] == [f"{conv_id}::smol-b"]
    assert page.stored(conv_id)["model"] == "smol-b"
