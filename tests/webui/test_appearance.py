"""How the page looks and loads: ready well under a second, light and dark (the system's
preference, and the toggle), and usable at a phone's width (the conversation list slides
in, nothing overflows sideways, the composer stays on screen)."""

from __future__ import annotations

LIGHT, DARK = "rgb(255, 255, 255)", "rgb(21, 22, 26)"


def _background(page) -> str:
    return page.js("return getComputedStyle(document.body).backgroundColor")


def test_the_page_is_ready_well_under_a_second(page) -> None:
    page.open()
    ready = page.js("return performance.getEntriesByName('pyllama-ready')[0].startTime")
    assert ready < 1000, f"ready after {ready:.0f} ms"
    files = page.js(
        "return performance.getEntriesByType('resource').filter((e) => e.name.includes('/webui/')).length"
    )
    assert files >= 10  # the modules, the stylesheet and the icon, all from this server


def test_light_dark_and_the_toggle(page) -> None:
    driver = page.driver
    try:
        for scheme, colour in (("light", LIGHT), ("dark", DARK)):
            driver.execute_cdp_cmd(
                "Emulation.setEmulatedMedia",
                {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
            )
            page.open()
            assert _background(page) == colour, scheme
        toggled = []
        for _ in range(3):
            page.find("#theme").click()
            toggled.append((page.find("#theme").get_attribute("title"), _background(page)))
        # the system says dark: system -> light -> dark -> system
        assert toggled == [("Theme: light", LIGHT), ("Theme: dark", DARK), ("Theme: system", DARK)]
        page.find("#theme").click()
        driver.refresh()
        page.wait(lambda: page.js("return document.body.dataset.ready === 'true'"), 30)
        assert _background(page) == LIGHT  # remembered across a reload
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_a_phone_width_screen(page) -> None:
    driver = page.driver
    driver.set_window_size(390, 844)
    try:
        page.open(settings={"sampling": {"max_tokens": "16"}, "extra": ""})
        width = page.js("return window.innerWidth")
        assert width <= 400
        assert not page.find("#sidebar").is_displayed() or page.js(
            "return document.getElementById('sidebar').getBoundingClientRect().right <= 0"
        )
        page.type_message("Hello there")
        page.wait_reply()
        assert (
            page.js("return document.scrollingElement.scrollWidth") <= width
        )  # no sideways scroll
        composer = page.js(
            "return document.getElementById('prompt').getBoundingClientRect().toJSON()"
        )
        assert composer["left"] >= 0 and composer["right"] <= width and composer["bottom"] <= 844
        page.find("#menu").click()
        page.wait(
            lambda: page.js(
                "return document.getElementById('sidebar').getBoundingClientRect().left === 0"
            ),
            5,
            "the list slid in",
        )
        page.find("#conversations li .title").click()  # picking one closes the list
        page.wait(
            lambda: page.js(
                "return document.getElementById('sidebar').getBoundingClientRect().right <= 0"
            ),
            5,
            "the list slid out",
        )
    finally:
        driver.set_window_size(1280, 900)
