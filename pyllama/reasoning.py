"""Reasoning ("thinking") text: ``<think>...</think>`` at the start of a reply, or a reply that
starts inside it because the prompt already opened the tag. llama-server's
``--reasoning-format``: ``none`` leaves it in the content; ``deepseek``, ``deepseek-legacy``
and ``auto`` move it to ``reasoning_content`` (streamed too).

As llama-server, which parses the generation prompt and the reply as one text: the
reasoning is everything between the tags and the content everything after the end tag,
whitespace and all; a reply the prompt opened starts with what the prompt put after its
start tag (``\n`` for ``<think>\n``)."""

from __future__ import annotations

__all__ = [
    "FORMATS",
    "ReasoningStream",
    "close_thinking",
    "opening",
    "split_reasoning",
    "thinking_open",
    "thinking_tags",
]

START, END = "<think>", "</think>"
FORMATS = ("none", "deepseek", "deepseek-legacy", "auto")


# (start, end) thinking tags of the template families that have them
TAGS = ((START, END), ("<|START_THINKING|>", "<|END_THINKING|>"))


def thinking_tags(template_source: str) -> tuple[str, str] | None:
    for start, end in TAGS:
        if start in template_source and end in template_source:
            return start, end
    return None


def close_thinking(prompt: str, tags: tuple[str, str]) -> str:
    """--reasoning off: the reply starts after an empty, closed thinking block (what
    llama-server appends to a prompt that opened one, or that stops before one)."""
    start, end = tags
    tail = prompt.rstrip()
    if tail.endswith(end):
        return prompt  # the template closed it itself (enable_thinking=false)
    if tail.endswith(start):
        return prompt + end
    return prompt + start + end


def thinking_open(prompt: str) -> bool:
    """The rendered prompt ends inside an opened think block: the reply starts as reasoning."""
    tail = prompt.rstrip()
    return tail.endswith(START)


def opening(prompt: str) -> str:
    """What a prompt that opened a think block put from its start tag on (``<think>\n``):
    the reply continues it ("" when the prompt opened none)."""
    at = prompt.rfind(START)
    return prompt[at:] if at >= 0 and thinking_open(prompt) else ""


def split_reasoning(text: str, opened: str = "") -> tuple[str, str]:
    """(reasoning, content) of a whole reply; ``opened``: the prompt's ``opening``.
    Without a think block: ("", text)."""
    s = ReasoningStream(opened)
    r1, c1 = s.feed(text)
    r2, c2 = s.finish()
    return r1 + r2, c1 + c2


def _partial_suffix(buf: str, tag: str) -> int:
    """Length of the longest end of buf that begins tag (held back: the tag may follow)."""
    for k in range(min(len(tag) - 1, len(buf)), 0, -1):
        if tag.startswith(buf[-k:]):
            return k
    return 0


class ReasoningStream:
    """Splits streamed text into (reasoning_delta, content_delta) pairs."""

    def __init__(self, opened: str = "") -> None:
        """``opened``: the prompt's ``opening`` (its start tag and what followed it)."""
        self.state = "think" if opened else "start"
        self.buf = opened[len(START) :] if opened.startswith(START) else opened

    def feed(self, delta: str) -> tuple[str, str]:
        self.buf += delta
        reasoning: list[str] = []
        content: list[str] = []
        while self.buf:
            if self.state == "start":
                head = self.buf.lstrip()
                if head.startswith(START):
                    self.buf = head[len(START) :]
                    self.state = "think"
                    continue
                if START.startswith(head):
                    break  # still maybe a think tag (or only whitespace so far)
                self.state = "content"
            if self.state == "think":
                at = self.buf.find(END)
                if at < 0:
                    keep = _partial_suffix(self.buf, END)
                    reasoning.append(self.buf[: len(self.buf) - keep])
                    self.buf = self.buf[len(self.buf) - keep :]
                    break
                reasoning.append(self.buf[:at])
                self.buf = self.buf[at + len(END) :]
                self.state = "content"
                continue
            content.append(self.buf)
            self.buf = ""
        return "".join(reasoning), "".join(content)

    def finish(self) -> tuple[str, str]:
        rest, self.buf = self.buf, ""
        if self.state == "think":
            return rest, ""  # never closed: all of it was reasoning
        return "", rest
