"""llama-cpp-python's named chat formats on pyllama give llama-cpp-python's own prompts,
stop strings and BOS handling, for every format pyllama offers
(``chat_formats.llama_cpp_python.json``: recorded under llama-cpp-python 0.3.36 with
tests/helpers/chat_formats.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.chat_formats import formats

RECORDED = json.loads(
    (Path(__file__).resolve().parent / "chat_formats.llama_cpp_python.json").read_text()
)
# 2023 models' formats with a fixed system prompt of their own (OpenBuddy, GPT4All
# Snoozy, OpenOrca): not offered; chat_format= names them as unknown
NOT_OFFERED = {"openbuddy", "snoozy", "open-orca"}
OURS = formats("pyllama.compat.llama_cpp")


def test_every_format_but_the_named_ones_is_offered() -> None:
    assert set(RECORDED) - set(OURS) == NOT_OFFERED
    assert set(OURS) <= set(RECORDED)


@pytest.mark.parametrize("name", sorted(set(RECORDED) - NOT_OFFERED))
def test_the_prompts_are_llama_cpp_pythons(name: str) -> None:
    assert OURS[name] == RECORDED[name]
