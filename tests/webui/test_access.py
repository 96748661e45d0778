"""A server with ``--api-key``: the page loads without the key, asks for it when the
server answers 401, refuses a wrong one and chats with the right one. The same server's
``--webui-config`` sets the page's defaults (theme, system prompt, sampling) and the
settings panel lists the keys the page has no use for. The page fetches nothing but its
own origin."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from helpers.servers import running_server

KEY = "sk-webui-test"
UI_CONFIG = {
    "theme": "dark",
    "systemMessage": "Answer in one word.",
    "max_tokens": 5,
    "customJson": '{"ignore_eos": true}',  # so that every reply is max_tokens long
    "fooBar": 1,
}


@pytest.fixture(scope="module")
def key_server(smollm_path: str) -> Iterator[str]:
    args = ("-m", smollm_path, "-t", "1", "-c", "2048", "--api-key", KEY)
    with running_server(*args, "--webui-config", json.dumps(UI_CONFIG)) as url:
        yield url


def _enter_key(page, key: str) -> None:
    page.wait(lambda: page.find("#key-dialog").is_displayed(), 30, "the key dialog")
    field = page.find("#key-input")
    field.clear()
    field.send_keys(key)
    page.find("#key-ok").click()


@pytest.mark.flag_effect("--webui-config", "--api-key")
def test_the_page_asks_for_the_key_and_sends_it(page_of, key_server: str) -> None:
    page = page_of(key_server)
    page.driver.get(key_server + "/health")
    page.js("localStorage.clear()")
    page.driver.get(key_server + "/")  # its files load without the key ...
    _enter_key(page, "wrong")  # ... and /props answers 401: the dialog
    page.wait(lambda: "refused" in page.find("#key-why").text, 10, "the refusal")
    _enter_key(page, KEY)
    page.wait(lambda: page.js("return document.body.dataset.ready === 'true'"), 30, "ready")
    assert page.find("#model-name").text.endswith(".gguf")
    assert page.js("return localStorage.getItem('pyllama.apiKey')") == KEY
    page.type_message("Hello")
    reply = page.wait_reply()
    # --webui-config's max_tokens and customJson went with the request
    assert reply["text"] and "5 tokens" in reply["stats"].split(" \u00b7 ")
    # everything the page loaded or asked came from its own origin
    origins = page.js(
        "return [...new Set(performance.getEntriesByType('resource').map((e) => new URL(e.name).origin))]"
    )
    assert origins == [key_server]


def test_webui_config_sets_the_pages_defaults(page_of, key_server: str) -> None:
    page = page_of(key_server)
    page.driver.get(key_server + "/health")
    page.js("localStorage.clear(); localStorage.setItem('pyllama.apiKey', arguments[0])", KEY)
    page.open(fresh=False)
    assert page.js("return document.documentElement.dataset.theme") == "dark"
    assert page.js("return getComputedStyle(document.body).backgroundColor") == "rgb(21, 22, 26)"
    page.find("#settings-btn").click()
    form = page.find("#settings-form")
    assert form.find_element("name", "system").get_attribute("value") == "Answer in one word."
    assert form.find_element("name", "max_tokens").get_attribute("placeholder") == "5"
    assert form.find_element("name", "extra").get_attribute("value") == '{"ignore_eos": true}'
    assert page.find("#ui-ignored").text == "Server defaults this page does not use: fooBar"
    page.find("#settings-cancel").click()
    page.find("#theme").click()  # the user's choice wins over the server's default
    assert page.js("return document.documentElement.dataset.theme") is None  # system
