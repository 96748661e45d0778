"""Screenshots of the chat page (``pyllama-server``'s ``/``): desktop and phone width, light
and dark, written to ``docs/img/webui_{desktop,phone}_{light,dark}.png``.

It drives the browser the tests use (Debian's ``chromium`` and ``chromedriver``, through
selenium from the test extra) against ``pyllama-server`` on the demo model. The long reply
is fixed by a grammar (sent as an extra request field), so every run shows the same
conversation; only the measured tokens per second change.

    python docs/webui_screenshots.py [--model path.gguf] [--out docs/img]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

OUT = Path(__file__).resolve().parent / "img"
REPLY = """Read it with `open()` in a `with` block, so the file is closed for you:

```python
from pathlib import Path

with open("notes.txt", encoding="utf-8") as f:
    for line in f:
        print(line.rstrip())

text = Path("notes.txt").read_text(encoding="utf-8")
```

A few things to keep in mind:

1. **Name the encoding**: the default depends on the platform.
2. Iterating over `f` reads *one line at a time*, which suits large files.
3. `Path.read_text` reads the whole file at once.

| way | memory | when |
|:----|:------:|:-----|
| `for line in f` | one line | big files |
| `read_text()` | whole file | small files |
"""
EARLIER = ["Name three rivers in Europe.", "What is a haiku?"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _server(model: str) -> Iterator[str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "pyllama.server", "-m", model, "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "-t", "1", "-c", "4096", "-a", "SmolLM2-135M-Instruct"],
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                raise SystemExit(f"pyllama-server exited with {proc.returncode}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _browser() -> webdriver.Chrome:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        raise SystemExit(
            "needs chromium and chromedriver: apt-get install chromium chromium-driver"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))


def _wait(browser: webdriver.Chrome, script: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not browser.execute_script(script):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {script}")
        time.sleep(0.1)


def _chat(browser: webdriver.Chrome, text: str, settings: dict[str, object]) -> None:
    browser.execute_script(
        "localStorage.setItem('pyllama.settings', arguments[0])", json.dumps(settings)
    )
    browser.find_element(By.ID, "new-chat").click()
    box = browser.find_element(By.ID, "prompt")
    box.send_keys(text, Keys.ENTER)
    _wait(
        browser,
        "const r = [...document.querySelectorAll('#messages article.msg.assistant')].pop();"
        "return r && r.dataset.state === 'done';",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a GGUF chat model (default: the demo model)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.model is None:
        from pyllama.models import demo_model

        args.model = demo_model()
    args.out.mkdir(parents=True, exist_ok=True)
    with _server(args.model) as url:
        browser = _browser()
        try:
            browser.set_window_size(1280, 860)
            browser.get(url + "/")
            _wait(browser, "return document.body.dataset.ready === 'true'")
            for text in EARLIER:
                _chat(browser, text, {"sampling": {"temperature": "0", "max_tokens": "40"}})
            grammar = (
                'root ::= "'
                + REPLY.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                + '"'
            )
            _chat(
                browser,
                "How do I read a text file in Python?",
                {"extra": json.dumps({"grammar": grammar})},
            )
            browser.execute_script("localStorage.removeItem('pyllama.settings')")
            shots = [("desktop", 1280, 860, False), ("phone", 390, 844, True)]
            for name, width, height, mobile in shots:
                browser.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride",
                    {
                        "width": width,
                        "height": height,
                        "deviceScaleFactor": 2 if mobile else 1,
                        "mobile": mobile,
                    },
                )
                for scheme in ("light", "dark"):
                    browser.execute_cdp_cmd(
                        "Emulation.setEmulatedMedia",
                        {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
                    )
                    browser.execute_script("document.scrollingElement.scrollTop = 1e9")
                    time.sleep(0.3)
                    path = args.out / f"webui_{name}_{scheme}.png"
                    browser.save_screenshot(str(path))
                    print(path)
        finally:
            browser.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
