"""How the chat page is served, without a browser: ``/`` gives browsers the page and other
clients Ollama's answer, the page's files load without an API key (the page asks for it),
the page may reach its own origin only, and ``--no-webui`` / ``--path`` take it away."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from pyllama.server import Settings, create_app
from pyllama.server.cli import parse_args
from pyllama.server.webui import WEBUI_DIR, load_assets

from helpers.servers import running_server

HTML_SINKS = re.compile(
    r"(?:inner|outer)HTML\s*\+?=|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment"
)
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def client(**settings: object) -> TestClient:
    """The app without its lifespan: no model is loaded, the page needs none."""
    return TestClient(create_app(Settings(model="unused.gguf", **settings)))  # type: ignore[arg-type]


def referenced(html: str) -> list[str]:
    """The files index.html and the modules name, as paths of the server."""
    names = set(re.findall(r'(?:href|src)="(webui/[^"]+)"', html))
    for path in WEBUI_DIR.glob("*.js"):
        names |= {"webui/" + m for m in re.findall(r"from '\./([\w-]+\.js)'", path.read_text())}
    return sorted("/" + n for n in names)


def test_browsers_get_the_page_and_other_clients_ollamas_answer() -> None:
    c = client()
    page = c.get("/", headers=BROWSER)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="webui/main.js">' in page.text
    assert page.headers["vary"] == "Accept"
    for accept in (None, "*/*", "application/json"):
        other = c.get("/", headers={"Accept": accept} if accept else {})
        assert other.text == "Ollama is running" and other.headers["vary"] == "Accept", accept
    assert c.head("/", headers=BROWSER).status_code == 200


def test_the_page_reaches_its_own_origin_only() -> None:
    csp = client().get("/", headers=BROWSER).headers["content-security-policy"]
    rules = dict(rule.strip().split(" ", 1) for rule in csp.split(";"))
    assert rules["default-src"] == "'none'"
    assert rules["connect-src"] == "'self'" and rules["script-src"] == "'self'"
    assert rules["img-src"] == "'self' data: blob:"  # attachments; never remote images


def test_every_file_the_page_loads_is_served_with_its_type() -> None:
    c = client()
    paths = referenced(c.get("/", headers=BROWSER).text)
    assert {"/webui/main.js", "/webui/markdown.js", "/webui/style.css"} <= set(paths)
    types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    for path in paths:
        r = c.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith(types[Path(path).suffix]), path
        again = c.get(path, headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b"", path
    assert c.get("/webui/missing.js").status_code == 404
    assert c.get("/webui/..%2Fserver%2Fapp.py").status_code == 404


def test_with_an_api_key_the_page_loads_and_the_api_does_not() -> None:
    c = client(api_keys=["secret"])
    page = c.get("/", headers=BROWSER)
    assert page.status_code == 200
    for path in [*referenced(page.text), "/sw.js", "/index.html"]:
        assert c.get(path).status_code == 200, path
    assert c.get("/props").status_code == 401
    assert c.get("/props", headers={"Authorization": "Bearer secret"}).status_code != 401


def test_no_webui_leaves_ollamas_answer_and_the_worker_that_clears_an_old_ui() -> None:
    c = client(webui=False)
    assert c.get("/", headers=BROWSER).text == "Ollama is running"
    assert c.get("/webui/main.js").status_code == 404
    sw = c.get("/sw.js")
    assert sw.status_code == 200 and "registration.unregister()" in sw.text


def test_path_replaces_the_page(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<p>mine</p>")
    c = client(static_path=str(tmp_path))
    assert c.get("/", headers=BROWSER).text == "<p>mine</p>"
    assert c.get("/webui/main.js").status_code == 404


@pytest.mark.parametrize(
    ("argv", "environ", "on"),
    [
        ([], {}, True),
        (["--no-webui"], {}, False),
        (["--no-ui"], {}, False),
        (["--webui"], {}, True),
        ([], {"LLAMA_ARG_UI": "0"}, False),
        ([], {"LLAMA_ARG_WEBUI": "false"}, False),
    ],
)
def test_the_page_is_on_unless_turned_off(
    argv: list[str], environ: dict[str, str], on: bool
) -> None:
    assert parse_args(["-m", "x.gguf", *argv], environ=environ).webui is on


def test_the_page_is_small_and_all_its_own() -> None:
    assets = load_assets()
    total = sum(len(a.body) for a in assets.values())
    assert total < 150_000, total
    for name, asset in assets.items():
        text = asset.body.decode()
        # model text becomes DOM nodes (dom.js, markdown.js): nothing parses strings as HTML
        assert not HTML_SINKS.search(text), name
        assert not re.search(r"""(?:src|href|from|import\()\s*=?\s*["'](?:https?:)?//""", text), (
            name
        )


def test_opening_the_page_does_not_wake_a_sleeping_model(smollm_path: str) -> None:
    args = ("-m", smollm_path, "-t", "1", "-c", "1024", "--sleep-idle-seconds", "1")
    with running_server(*args) as url:
        asleep = lambda: httpx.get(url + "/props").json()["is_sleeping"]  # noqa: E731
        deadline = time.monotonic() + 30
        while not asleep():
            assert time.monotonic() < deadline, "the server did not go to sleep"
            time.sleep(0.1)
        page = httpx.get(url + "/", headers=BROWSER)
        assert page.status_code == 200
        for path in [*referenced(page.text), "/sw.js", "/index.html"]:
            assert httpx.get(url + path).status_code == 200, path
        httpx.post(url + "/v1/streams/lookup", json={"conversation_ids": ["x"]})
        assert asleep()  # the page's first message wakes it, not the page
        r = httpx.post(
            url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
            timeout=60,
        )
        assert r.status_code == 200 and not asleep()
