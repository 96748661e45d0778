"""Replies render as markdown built from DOM nodes, so markup in model text stays text.

The model is made to write exact text with a grammar (the page's "extra request fields"
carry it, as a user could): a markdown sample, and text holding ``<img src=x onerror=...>``
and ``<script>``. Had the page put that text in as HTML, the reply would hold an ``img``
and a ``script`` element (and the onerror handler would have run); it must hold neither
and show the characters. The renderer module is also run in the page on cases a small
model would rarely write (links with other schemes, images, unclosed fences)."""

from __future__ import annotations

MARKDOWN = (
    "## Plan\n\n"
    "Some **bold**, *italic*, ~~old~~ and `inline code`; see https://example.org/docs.\n\n"
    "1. first\n2. second\n   - nested\n\n"
    "| name | size |\n|:-----|-----:|\n| a | 1 |\n| b | 22 |\n\n"
    "```python\nprint('hi')\n```\n"
)
HOSTILE = (
    "Look: <img src=x onerror=window.xss=1> and <script>window.pwned=1</script> "
    "<b>not bold</b> [click](javascript:window.pwned=2) done"
)


def test_a_markdown_reply_becomes_elements(page) -> None:
    page.reply_with(MARKDOWN)
    reply = page.find_all("#messages article.msg.assistant .content")[-1]
    html = page.js(
        """const c = arguments[0];
        const q = (s) => [...c.querySelectorAll(s)].map((e) => e.textContent);
        return {h2: q('h2'), strong: q('strong'), em: q('em'), del: q('del'), code: q('p code'),
                ol: q('ol > li'), nested: q('ol ul > li'), th: q('th'), td: q('td'),
                right: q('td.align-right'), pre: q('pre code'), lang: q('.code-block .lang'),
                links: [...c.querySelectorAll('a')].map((a) => [a.textContent, a.href, a.rel, a.target]),
                copy: c.querySelectorAll('.code-block button.copy').length};""",
        reply,
    )
    assert html["h2"] == ["Plan"]
    assert (html["strong"], html["em"], html["del"], html["code"]) == (
        ["bold"],
        ["italic"],
        ["old"],
        ["inline code"],
    )
    assert html["ol"][0] == "first" and html["nested"] == ["nested"]
    assert (html["th"], html["td"], html["right"]) == (
        ["name", "size"],
        ["a", "1", "b", "22"],
        ["1", "22"],
    )
    assert (html["pre"], html["lang"], html["copy"]) == (["print('hi')"], ["python"], 1)
    assert html["links"] == [
        [
            "https://example.org/docs",
            "https://example.org/docs",
            "noopener noreferrer nofollow",
            "_blank",
        ]
    ]
    page.find("#messages .code-block button.copy").click()
    page.wait(lambda: page.find("#messages .code-block button.copy").text == "Copied", 5)


def test_markup_in_a_reply_is_shown_as_text(page) -> None:
    page.reply_with(HOSTILE)
    content = page.find_all("#messages article.msg.assistant .content")[-1]
    found = page.js(
        """const c = arguments[0];
        return {elements: [...c.querySelectorAll('*')].map((e) => e.tagName),
                text: c.textContent, xss: window.xss, pwned: window.pwned};""",
        content,
    )
    assert found["elements"] == ["P"]  # one paragraph of text: no img, script, b or a
    assert found["text"] == HOSTILE
    assert found["xss"] is None and found["pwned"] is None


CASES = {
    "[x](javascript:alert(1))": ("P", [], "[x](javascript:alert(1))"),
    "[local](/etc/passwd) and [data](data:text/html,hi)": (
        "P",
        [],
        "[local](/etc/passwd) and [data](data:text/html,hi)",
    ),
    "![cat](https://example.org/cat.png)": ("P", ["A"], "[image: cat]"),
    "```\n<b>open fence": (
        "DIV",
        ["DIV", "SPAN", "BUTTON", "PRE", "CODE"],
        "text" + "Copy" + "<b>open fence",
    ),
    "**never closed": ("P", [], "**never closed"),
    "> quoted <i>x</i>": ("BLOCKQUOTE", ["P"], "quoted <i>x</i>"),
    "- [x] done\n- [ ] todo": ("UL", ["LI", "SPAN", "LI", "SPAN"], "\u2611 done\u2610 todo"),
}


def test_the_renderer_builds_nodes_for_any_text(page) -> None:
    page.open()
    got = page.driver.execute_async_script(
        """const [cases, done] = arguments;
        import('./webui/markdown.js').then(({renderMarkdown}) => done(cases.map((text) => {
          const box = document.createElement('div');
          box.append(renderMarkdown(text));
          const first = box.firstElementChild;
          return [first.tagName, [...first.querySelectorAll('*')].map((e) => e.tagName), box.textContent];
        })));""",
        list(CASES),
    )
    assert dict(zip(CASES, map(tuple, got))) == CASES
