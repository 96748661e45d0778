"""pyllama.serve.prefix: a request's prompt as text (the same for the same prompt in every
protocol, different when any part of it differs) and as chained block hashes."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from pyllama.serve.prefix import BLOCK_BYTES, block_hashes, prompt_text

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]

CHAT = {
    "model": "any",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    ],
    "tools": TOOLS,
    "temperature": 0.2,
}


def _edited(body: dict, edit) -> dict:
    out = copy.deepcopy(body)
    edit(out)
    return out


def _reordered(value):
    """The same JSON with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


# ---------------------------------------------------------------- OpenAI chat


def test_same_chat_prompt_same_text():
    assert prompt_text(CHAT) == prompt_text(copy.deepcopy(CHAT))
    assert prompt_text(CHAT)  # not empty


def test_sampling_and_other_non_prompt_fields_do_not_change_the_text():
    other = _edited(CHAT, lambda b: b.update(model="x", temperature=1.5, stream=True, seed=3))
    other["max_tokens"] = 12
    assert prompt_text(other) == prompt_text(CHAT)


def test_field_order_does_not_change_the_text():
    # the bodies as a client writes them, parsed as the ingress parses them
    model_first = json.dumps(CHAT)
    model_last = json.dumps({**{k: v for k, v in CHAT.items() if k != "model"}, "model": "any"})
    reversed_keys = json.dumps(_reordered(CHAT))  # inside messages, tools, tool calls too
    assert model_first != model_last != reversed_keys
    texts = {prompt_text(json.loads(s)) for s in (model_first, model_last, reversed_keys)}
    assert len(texts) == 1


EDITS = {
    "system message text": lambda b: b["messages"][0].update(content="You are verbose."),
    "user message text": lambda b: b["messages"][1].update(content="Weather in Rome?"),
    "last content part": lambda b: b["messages"][4]["content"][0].update(text="And today?"),
    "a role": lambda b: b["messages"][1].update(role="assistant"),
    "tool call arguments": lambda b: b["messages"][2]["tool_calls"][0]["function"].update(
        arguments='{"city": "Rome"}'
    ),
    "tool result": lambda b: b["messages"][3].update(content="5 C, rain"),
    "tool call id": lambda b: b["messages"][3].update(tool_call_id="call_2"),
    "a tool's description": lambda b: b["tools"][0]["function"].update(description="Weather"),
    "a tool's parameters": lambda b: b["tools"][0]["function"]["parameters"].update(required=[]),
    "another tool": lambda b: b["tools"].append(
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}
    ),
    "no tools": lambda b: b.pop("tools"),
    "no system message": lambda b: b["messages"].pop(0),
    "a message more": lambda b: b["messages"].append({"role": "user", "content": "Thanks"}),
    "two messages swapped": lambda b: b["messages"].insert(0, b["messages"].pop(1)),
    "a message's name": lambda b: b["messages"][1].update(name="bob"),
}


@pytest.mark.parametrize("what", list(EDITS))
def test_chat_text_differs_when_any_part_of_the_prompt_differs(what: str):
    assert prompt_text(_edited(CHAT, EDITS[what])) != prompt_text(CHAT)


def test_a_continued_chat_starts_with_the_earlier_turn():
    # turn 2 resends turn 1 and appends: its text must extend turn 1's, so they share blocks
    turn1 = {"messages": [{"role": "system", "content": "S" * 900}], "tools": TOOLS}
    turn1["messages"].append({"role": "user", "content": "Hi"})
    turn2 = _edited(turn1, lambda b: b["messages"].append({"role": "assistant", "content": "Yo"}))
    turn2["messages"].append({"role": "user", "content": "How are you?"})
    assert prompt_text(turn2).startswith(prompt_text(turn1))
    h1, h2 = block_hashes(prompt_text(turn1)), block_hashes(prompt_text(turn2))
    assert len(h1) >= 3 and h2[: len(h1)] == h1


def test_no_prompt_fields_no_text():
    assert prompt_text({}) == ""
    assert prompt_text({"model": "m", "temperature": 1}) == ""


# ---------------------------------------------------------------- Anthropic


@pytest.mark.parametrize(
    "system",
    ["You are a pirate.", [{"type": "text", "text": "You are a pirate."}]],
    ids=["string", "blocks"],
)
def test_anthropic_system(system):
    body = {
        "model": "claude",
        "max_tokens": 10,
        "system": system,
        "messages": [{"role": "user", "content": "Ahoy"}],
    }
    text = prompt_text(body)
    assert "You are a pirate." in text
    assert text == prompt_text(json.loads(json.dumps(_reordered(body))))
    if isinstance(system, str):
        other = _edited(body, lambda b: b.update(system="You are a parrot."))
    else:
        other = _edited(body, lambda b: b["system"][0].update(text="You are a parrot."))
    assert prompt_text(other) != text
    if isinstance(system, list):
        more = _edited(body, lambda b: b["system"].append({"type": "text", "text": "Be brief."}))
        assert prompt_text(more) != text
    no_system = _edited(body, lambda b: b.pop("system"))
    assert prompt_text(no_system) != text
    other_user = _edited(body, lambda b: b["messages"][0].update(content="Avast"))
    assert prompt_text(other_user) != text


def test_anthropic_shared_system_prompt_shares_blocks():
    system = [{"type": "text", "text": "Rules. " * 300, "cache_control": {"type": "ephemeral"}}]
    a = {"system": system, "messages": [{"role": "user", "content": "first question" * 30}]}
    b = {"system": system, "messages": [{"role": "user", "content": "another one" * 30}]}
    ha, hb = block_hashes(prompt_text(a)), block_hashes(prompt_text(b))
    shared = len("Rules. " * 300) // BLOCK_BYTES
    assert shared >= 5
    assert ha[:shared] == hb[:shared]
    assert ha != hb


# ---------------------------------------------------------------- Responses


@pytest.mark.parametrize(
    "input_",
    [
        "Tell me a joke.",
        [{"role": "user", "content": "Tell me a joke."}],
        [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Tell me a joke."}],
            }
        ],
    ],
    ids=["string", "messages", "typed-items"],
)
def test_responses_instructions_and_input(input_):
    body = {"model": "m", "instructions": "Be funny.", "input": input_, "store": False}
    text = prompt_text(body)
    assert "Be funny." in text and "Tell me a joke." in text
    assert text == prompt_text(json.loads(json.dumps(_reordered(body))))
    assert prompt_text(_edited(body, lambda b: b.update(instructions="Be dull."))) != text
    assert prompt_text(_edited(body, lambda b: b.pop("instructions"))) != text
    other = json.loads(json.dumps(body).replace("Tell me a joke.", "Tell me a story."))
    assert prompt_text(other) != text
    # the instructions come first, whichever the order of the fields
    assert text.index("Be funny.") < text.index("Tell me a joke.")


def test_responses_input_list_differs_per_item():
    body = {
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Bye"},
        ],
    }
    text = prompt_text(body)
    for i in range(3):
        other = _edited(body, lambda b, i=i: b["input"][i].update(content="changed"))
        assert prompt_text(other) != text
    assert prompt_text(_edited(body, lambda b: b["input"].pop())) != text


# ---------------------------------------------------------------- Ollama, /completion


def test_ollama_generate_system_and_prompt():
    body = {
        "model": "m",
        "system": "You are a poet.",
        "prompt": "Write about rain.",
        "stream": False,
    }
    text = prompt_text(body)
    assert text.index("You are a poet.") < text.index("Write about rain.")
    swapped = {"prompt": "Write about rain.", "stream": False, "model": "m"}
    swapped["system"] = "You are a poet."
    assert prompt_text(swapped) == text
    assert prompt_text({**body, "system": "You are a chef."}) != text
    assert prompt_text({**body, "prompt": "Write about snow."}) != text
    no_system = {k: v for k, v in body.items() if k != "system"}
    assert prompt_text(no_system) != text
    # a system prompt is not a prompt: the same words in the other field differ
    assert prompt_text({"system": "x"}) != prompt_text({"prompt": "x"})


def test_ollama_chat_messages():
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "options": {"seed": 1}}
    text = prompt_text(body)
    assert prompt_text({**body, "options": {"seed": 2}}) == text
    assert prompt_text({**body, "messages": [{"role": "user", "content": "Ho"}]}) != text


def test_completion_prompt_string():
    text = prompt_text({"prompt": "Once upon a time", "n_predict": 8})
    assert "Once upon a time" in text
    assert prompt_text({"n_predict": 99, "prompt": "Once upon a time"}) == text
    assert prompt_text({"prompt": "Once upon a tide"}) != text


def test_completion_prompt_token_ids():
    ids = list(range(1, 400))
    text = prompt_text({"prompt": ids})
    assert text == prompt_text({"prompt": list(ids)})
    assert text != prompt_text({"prompt": [*ids[:-1], 7]})  # last id changed
    assert text != prompt_text({"prompt": [9, *ids[1:]]})  # first id changed
    assert text != prompt_text({"prompt": ids[:-1]})
    assert block_hashes(text)  # long enough to have blocks


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param([1, 2, 3], [1, 2, 4], id="different-ids"),
        pytest.param(
            [1, 23],
            [12, 3],
            id="ids-split-differently",
        ),
        pytest.param(
            "123",
            [1, 2, 3],
            id="text-vs-ids",
        ),
        pytest.param(
            [151, 644],
            [15, 1644],
            id="ids-realistic",
        ),
    ],
)
def test_different_completion_prompts_have_different_text(a, b):
    assert prompt_text({"prompt": a}) != prompt_text({"prompt": b})


# ---------------------------------------------------------------- block_hashes


def test_block_count_whole_blocks_only():
    assert block_hashes("") == ()
    assert block_hashes("a" * (BLOCK_BYTES - 1)) == ()
    assert len(block_hashes("a" * BLOCK_BYTES)) == 1
    assert len(block_hashes("a" * (2 * BLOCK_BYTES + 100))) == 2
    assert len(block_hashes("a" * 1000, block_bytes=100)) == 10
    assert all(isinstance(h, int) and 0 <= h < 2**64 for h in block_hashes("a" * 1000, 100))


def test_partial_last_block_is_left_out():
    base = "x" * (3 * BLOCK_BYTES)
    assert (
        block_hashes(base + "tail one") == block_hashes(base + "another tail") == block_hashes(base)
    )


def _text(*blocks: str, block: int = BLOCK_BYTES) -> str:
    return "".join(c * block for c in blocks)


@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_hashes_are_chained(k: int):
    a = _text(*"abcdef"[:k], "x", "y", "z")
    b = _text(*"abcdef"[:k], "q", "y", "z")  # blocks after k are equal again
    ha, hb = block_hashes(a), block_hashes(b)
    assert len(ha) == len(hb) == k + 3
    assert ha[:k] == hb[:k]
    # hash i stands for the whole prefix: once they differ, they differ to the end
    assert all(x != y for x, y in zip(ha[k:], hb[k:]))


def test_a_block_hash_depends_on_its_position():
    h = block_hashes(_text("a", "a", "a"))
    assert len(set(h)) == 3


def test_one_byte_change_changes_its_block_and_every_later_one():
    text = "".join(chr(ord("a") + i % 26) for i in range(5 * BLOCK_BYTES))
    h = block_hashes(text)
    pos = 2 * BLOCK_BYTES + 17
    changed = block_hashes(text[:pos] + "#" + text[pos + 1 :])
    assert changed[:2] == h[:2]
    assert all(x != y for x, y in zip(changed[2:], h[2:]))


def test_max_blocks_caps_the_hashes():
    text = _text(*"abcdefghij")
    full = block_hashes(text)
    assert len(full) == 10
    assert block_hashes(text, max_blocks=3) == full[:3]
    assert block_hashes(text, max_blocks=0) == ()
    assert block_hashes(text, max_blocks=50) == full
    assert len(block_hashes("z" * (BLOCK_BYTES * 600))) == 512  # MAX_BLOCKS by default


def test_non_ascii_counts_utf8_bytes():
    assert len(block_hashes("é" * (BLOCK_BYTES // 2))) == 1  # 2 bytes each
    assert block_hashes("é" * (BLOCK_BYTES // 2 - 1)) == ()
    # blocks may end inside a character
    h = block_hashes("a" + "日本語" * 200)
    assert len(h) == len(("a" + "日本語" * 200).encode()) // BLOCK_BYTES
    assert block_hashes("é" * 300) != block_hashes("e\u0301" * 300)  # bytes, not looks
    assert block_hashes("😀" * 100) != block_hashes("😁" * 100)
    # JSON may carry a lone surrogate; it must not raise
    lone = json.loads('"' + "\\ud800" * 200 + '"')
    assert len(block_hashes(lone)) == 2


SCRIPT = """
import json, sys
from pyllama.serve.prefix import block_hashes, prompt_text
body = json.loads(sys.argv[1])
print(json.dumps([prompt_text(body), list(block_hashes(prompt_text(body)))]))
"""


def test_hashes_are_the_same_in_another_process():
    body = copy.deepcopy(CHAT)
    body["messages"][0]["content"] = "Système: réponds brièvement. " * 40
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(body)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
        cwd="/",  # outside the source tree, which has no compiled module
    )
    text, hashes = json.loads(out.stdout)
    assert text == prompt_text(body)
    assert tuple(hashes) == block_hashes(prompt_text(body))
    assert len(hashes) >= 4
