"""The documentation site renders in Chromium: the built pages (mkdocs build) served over
HTTP, each with Material's navigation, its heading, its images loaded and no script error.
``PYLLAMA_SITE_SCREENSHOTS=DIR`` keeps a screenshot of each page there."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.doc_blocks import MKDOCS
from helpers.static_http import serving

ROOT = Path(__file__).resolve().parents[2]
PAGES = {  # path in the site -> its first heading
    "": "pyllama",
    "benchmarks/": "Benchmarks",
    "server/protocols/": "Protocols",
    "python/reference/": "Reference",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [MKDOCS, "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    with serving(out) as url:
        yield url + "/"


@pytest.mark.parametrize("page", list(PAGES), ids=[p or "home" for p in PAGES])
def test_page_renders(site: str, page: str, driver: Any) -> None:
    from selenium.webdriver.common.by import By

    driver.get_log("browser")  # the shared browser's earlier pages' entries: not this page's
    driver.get(site + page)
    title = driver.find_element(By.CSS_SELECTOR, "article h1").text
    assert title.startswith(PAGES[page]), title
    # Material's layout and styles are there: the navigation's sections, a styled header
    nav = driver.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary .md-nav__item")
    assert len(nav) > 10
    header_bg = driver.execute_script(
        "return getComputedStyle(document.querySelector('header.md-header')).backgroundColor"
    )
    assert header_bg not in ("", "rgba(0, 0, 0, 0)"), header_bg
    broken = driver.execute_script(
        "return [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
        ".map(i => i.src)"
    )
    assert not broken, broken
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    keep = os.environ.get("PYLLAMA_SITE_SCREENSHOTS")
    if keep:
        driver.save_screenshot(
            str(Path(keep) / f"site_{(page or 'home').strip('/').replace('/', '_')}.png")
        )
