"""The chat page in a real browser: Debian's ``chromium`` driven through its
``chromedriver`` by selenium, and the servers whose page the tests open.

Without the browser (``apt-get install chromium chromium-driver``) or selenium (the test
extra) the browser tests are skipped and say which is missing; PYLLAMA_REQUIRE_BROWSER=1
(as ``.ci/run`` sets) makes that an error instead."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from helpers.servers import running_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
TIMEOUT = 120.0  # a reply on two busy cores


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install '.[test]'"
    missing = [
        name for name, path in (("chromium", CHROMIUM), ("chromedriver", DRIVER)) if not path
    ]
    if missing:
        return f"{' and '.join(missing)} not found: apt-get install chromium chromium-driver"
    return None


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    why = browser_missing()
    if why is not None:
        if os.environ.get("PYLLAMA_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PYLLAMA_REQUIRE_BROWSER=1: {why}")
        pytest.skip(why)
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options, service=webdriver.ChromeService(DRIVER))
    browser.set_script_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="session")
def chat_server(smollm_path: str) -> Iterator[str]:
    """pyllama-server on SmolLM2 with two slots (the page's default: the web UI on). One
    compute thread: on a 2-core machine that something else keeps busy, two threads spin
    at ggml's barriers and a reply crawls (0.5 tokens/s against 70)."""
    with running_server("-m", smollm_path, "-t", "1", "-c", "4096", "-np", "2") as url:
        yield url


class Page:
    """The chat page of ``url`` in ``driver``, with what the tests do on it."""

    def __init__(self, driver: Any, url: str) -> None:
        self.driver = driver
        self.url = url

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def wait(self, what: Callable[[], Any], timeout: float = TIMEOUT, why: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = what()
            if got:
                return got
            assert time.monotonic() < deadline, f"timed out waiting: {why or what}"
            time.sleep(0.05)

    def open(self, *, fresh: bool = True, settings: dict[str, Any] | None = None) -> None:
        """Opens the page; ``fresh``: with this origin's storage emptied first."""
        if fresh:
            self.driver.get(self.url + "/health")  # same origin, no page holding the database
            self.driver.execute_async_script(
                """const done = arguments[0];
                localStorage.clear();
                const req = indexedDB.deleteDatabase('pyllama-webui');
                req.onsuccess = req.onerror = req.onblocked = () => done(true);"""
            )
            if settings is not None:
                self.js(
                    "localStorage.setItem('pyllama.settings', arguments[0])", json.dumps(settings)
                )
        self.driver.get(self.url + "/")
        self.wait(
            lambda: self.js("return document.body.dataset.ready === 'true'"), 30, "page ready"
        )

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def type_message(self, text: str, enter: bool = True) -> None:
        from selenium.webdriver.common.keys import Keys

        box = self.find("#prompt")
        box.click()
        box.send_keys(text)
        if enter:
            box.send_keys(Keys.ENTER)

    def replies(self) -> list[Any]:
        return self.find_all("#messages article.msg.assistant")

    def reply_count(self) -> int:
        return len(self.replies())

    def last_reply(self) -> dict[str, Any]:
        """The last reply's state, text (as shown) and statistics line."""
        return self.js(
            """const all = document.querySelectorAll('#messages article.msg.assistant');
            const n = all[all.length - 1];
            return n ? {state: n.dataset.state, text: n.querySelector('.content').textContent,
                        stats: n.querySelector('.stats').textContent, id: n.dataset.id} : null;"""
        )

    def wait_reply(self, states: tuple[str, ...] = ("done",), timeout: float = TIMEOUT) -> dict:
        def ended() -> dict | None:
            r = self.last_reply()
            return r if r and r["state"] in states else None

        return self.wait(ended, timeout, f"a reply in state {states}")

    def reply_with(self, text: str) -> dict[str, Any]:
        """A fresh page whose next reply is exactly ``text``: a grammar with that one sentence
        goes in the settings' extra request fields, so the model can write nothing else."""
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        extra = json.dumps({"grammar": f'root ::= "{escaped}"', "temperature": 0})
        self.open(settings={"extra": extra, "sampling": {}})
        self.type_message("Go.")
        return self.wait_reply()

    def conversation_id(self) -> str:
        return self.js("return localStorage.getItem('pyllama.current')")

    def stored(self, conv_id: str) -> dict[str, Any]:
        """The conversation as the page keeps it in IndexedDB."""
        return self.driver.execute_async_script(
            """const [id, done] = arguments;
            const req = indexedDB.open('pyllama-webui');
            req.onsuccess = () => {
              const get = req.result.transaction('conversations').objectStore('conversations').get(id);
              get.onsuccess = () => { req.result.close(); done(get.result); };
            };""",
            conv_id,
        )


@pytest.fixture
def page(driver: Any, chat_server: str) -> Page:
    return Page(driver, chat_server)


@pytest.fixture
def page_of(driver: Any) -> Callable[[str], Page]:
    """The page of another server (a base URL)."""
    return lambda url: Page(driver, url)
