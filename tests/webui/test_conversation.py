"""A conversation in the page, as a user has it: a message typed and sent with Enter, the
reply seen growing in the page and finishing with its statistics; Stop (and Esc) ending a
long reply on the server too; the conversation found again after a reload, and a reply
that a reload interrupted read on from the server's resumable stream."""

from __future__ import annotations

import json
import time

import httpx

LONG = {"extra": json.dumps({"ignore_eos": True, "max_tokens": 3000}), "sampling": {}}


def _busy_slots(url: str) -> list[int]:
    return [s["id"] for s in httpx.get(url + "/slots").json() if s["is_processing"]]


def _stream_text(url: str, conv_id: str) -> str:
    """The reply's whole text as the server's resumable stream holds it."""
    r = httpx.get(url + "/v1/stream", params={"conv_id": conv_id, "from": 0}, timeout=60)
    assert r.status_code == 200, r.text
    text = ""
    for line in r.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                text += choice.get("delta", {}).get("content") or ""
    return text


def test_a_reply_streams_into_the_page_and_finishes(page, chat_server: str) -> None:
    page.open(settings={"sampling": {"temperature": "0", "max_tokens": "48"}, "extra": ""})
    assert page.find("#attach").get_attribute("disabled") is not None  # no projector here
    # every length the reply's text takes on screen, as the page changes it
    page.js(
        """window.lengths = [];
        new MutationObserver(() => {
          const all = document.querySelectorAll('#messages article.msg.assistant .content');
          if (all.length) window.lengths.push(all[all.length - 1].textContent.length);
        }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});"""
    )
    page.type_message("Write a sentence about the sea.")
    reply = page.wait_reply()
    lengths = [n for n in page.js("return window.lengths") if n]
    assert len(set(lengths)) >= 3, lengths  # it grew in steps, not in one piece at the end
    assert lengths[-1] == len(reply["text"]) > 0
    n_ctx = httpx.get(chat_server + "/props").json()["default_generation_settings"]["n_ctx"]
    assert "tokens/s" in reply["stats"] and f"/{n_ctx} (" in reply["stats"]  # timings, n_ctx
    user = page.find_all("#messages article.msg.user .content")
    assert [u.text for u in user] == ["Write a sentence about the sea."]
    assert page.find("#conversations li.current .title").text == "Write a sentence about the sea."
    assert page.find("#prompt").get_attribute("value") == ""
    assert page.find("#stop").is_displayed() is False and page.find("#send").is_displayed()


def test_shift_enter_is_a_new_line_and_the_settings_panel_reaches_the_server(page) -> None:
    from selenium.webdriver.common.keys import Keys

    page.open()
    page.find("#settings-btn").click()
    form = page.find("#settings-form")
    for name, value in (("max_tokens", "7"), ("temperature", "0")):
        form.find_element("name", name).send_keys(value)
    form.find_element("name", "extra").send_keys('{"ignore_eos": true}')
    page.find("#settings-save").click()
    box = page.find("#prompt")
    box.send_keys("first line", Keys.SHIFT, Keys.ENTER, Keys.NULL, "second line")
    assert page.reply_count() == 0
    assert page.js("return document.getElementById('prompt').value") == "first line\nsecond line"
    box.send_keys(Keys.ENTER)
    reply = page.wait_reply()
    assert "7 tokens" in reply["stats"].split(" \u00b7 "), reply  # max_tokens and ignore_eos sent
    shown = page.find("#messages article.msg.user .content").text
    assert shown == "first line\nsecond line"


def test_stop_ends_a_long_reply_here_and_on_the_server(page, chat_server: str) -> None:
    from selenium.webdriver.common.keys import Keys

    for stop in ("button", "escape"):
        page.open(settings=LONG)
        page.type_message(f"Tell a long story ({stop}).")
        page.wait(lambda: len((page.last_reply() or {}).get("text", "")) > 40, why="some text")
        assert page.find("#stop").is_displayed()
        if stop == "button":
            page.find("#stop").click()
        else:
            page.find("body").send_keys(Keys.ESCAPE)
        reply = page.wait_reply(("stopped",), timeout=10)
        time.sleep(1.0)
        assert page.last_reply()["text"] == reply["text"]  # it grows no more
        assert page.find("#send").is_displayed()
        page.wait(lambda: not _busy_slots(chat_server), 10, "the server's slot freed")
        found = httpx.post(
            chat_server + "/v1/streams/lookup", json={"conversation_ids": [page.conversation_id()]}
        ).json()
        assert found == []  # the stop dropped the server's stream too


def test_a_reload_finds_the_conversation(page) -> None:
    page.open(settings={"sampling": {"temperature": "0", "max_tokens": "24"}, "extra": ""})
    page.type_message("Name three colours.")
    before = page.wait_reply()
    page.driver.refresh()
    page.wait(lambda: page.js("return document.body.dataset.ready === 'true'"), 30)
    after = page.wait_reply()
    assert (after["text"], after["stats"], after["id"]) == (
        before["text"],
        before["stats"],
        before["id"],
    )
    assert page.find("#messages article.msg.user .content").text == "Name three colours."
    titles = [t.text for t in page.find_all("#conversations .title")]
    assert titles == ["Name three colours."]


def test_a_reload_during_a_reply_picks_it_up_again(page, chat_server: str) -> None:
    settings = {"extra": json.dumps({"ignore_eos": True, "max_tokens": 400}), "sampling": {}}
    page.open(settings=settings)
    page.type_message("Count slowly.")
    page.wait(lambda: len((page.last_reply() or {}).get("text", "")) > 20, why="some text")
    conv_id = page.conversation_id()
    cut = page.last_reply()
    assert cut["state"] == "streaming"
    page.driver.refresh()
    page.wait(lambda: page.js("return document.body.dataset.ready === 'true'"), 30)
    reply = page.wait_reply()
    assert reply["id"] == cut["id"] and len(reply["text"]) > len(cut["text"])
    assert "400 tokens" in reply["stats"].split(" \u00b7 "), reply
    # nothing lost or repeated at the seam: the page holds exactly what the server streamed
    assert page.stored(conv_id)["messages"][-1]["content"] == _stream_text(chat_server, conv_id)
    assert page.reply_count() == 1


def test_regenerate_and_edit_and_resend(page) -> None:
    page.open(settings={"sampling": {"temperature": "0", "max_tokens": "12"}, "extra": ""})
    page.type_message("Say hello.")
    first = page.wait_reply()
    page.find("#messages article.msg.assistant .regenerate").click()
    page.wait(lambda: page.last_reply()["id"] != first["id"], why="a new reply")
    second = page.wait_reply()
    assert page.reply_count() == 1 and second["text"]
    page.find("#messages article.msg.user .edit").click()
    area = page.find("#messages .edit-area")
    area.clear()
    area.send_keys("Say goodbye.")
    page.find("#messages .editing .primary").click()
    page.wait(lambda: page.last_reply()["id"] != second["id"], why="a reply to the edit")
    page.wait_reply()
    users = [u.text for u in page.find_all("#messages article.msg.user .content")]
    assert users == ["Say goodbye."] and page.reply_count() == 1


def test_conversations_are_listed_renamed_exported_and_deleted(page, tmp_path) -> None:
    from selenium.webdriver.common.keys import Keys

    page.open(settings={"sampling": {"max_tokens": "4"}, "extra": ""})
    for text in ("First chat.", "Second chat."):
        page.find("#new-chat").click()
        page.type_message(text)
        page.wait_reply()

    def titles() -> list[str]:  # read at once: the list is redrawn as conversations change
        return page.js(
            "return [...document.querySelectorAll('#conversations .title')].map((t) => t.textContent)"
        )

    assert titles() == ["Second chat.", "First chat."]  # the latest first
    page.find("#conversations li.current .rename").click()
    field = page.find("#conversations .rename-input")  # its text selected: typing replaces it
    field.send_keys("Renamed", Keys.ENTER)
    page.wait(lambda: titles() == ["Renamed", "First chat."], 5)
    page.driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}
    )
    page.find("#export-all").click()
    page.wait(lambda: list(tmp_path.glob("pyllama-conversations-*.json")), 10, "the export")
    (exported,) = tmp_path.glob("pyllama-conversations-*.json")
    data = json.loads(exported.read_text())
    assert data["format"] == "pyllama-conversations"
    assert [c["title"] for c in data["conversations"]] == ["Renamed", "First chat."]
    assert [m["role"] for m in data["conversations"][1]["messages"]] == ["user", "assistant"]
    page.driver.refresh()
    page.wait(lambda: page.js("return document.body.dataset.ready === 'true'"), 30)
    assert titles() == ["Renamed", "First chat."]
    page.find("#conversations li.current .delete").click()
    page.driver.switch_to.alert.accept()
    page.wait(lambda: titles() == ["First chat."], 5)
    assert page.reply_count() == 0  # the deleted one was open: an empty page now


def test_a_chat_request_names_the_model(page, chat_server: str) -> None:
    """Outside router mode too the page sends ``model`` (/props model_alias): a gateway's
    endpoint picker answers a chat request without it 400."""
    page.open(settings={"sampling": {"temperature": "0", "max_tokens": "4"}, "extra": ""})
    page.js(
        """window.sent = [];
        const plain = window.fetch;
        window.fetch = (url, init) => {
          if (String(url).endsWith('v1/chat/completions')) window.sent.push(JSON.parse(init.body));
          return plain(url, init);
        };"""
    )
    page.type_message("Hello")
    page.wait_reply()
    name = httpx.get(chat_server + "/props", timeout=30).json()["model_alias"]
    assert name and [body.get("model") for body in page.js("return window.sent")] == [name]
