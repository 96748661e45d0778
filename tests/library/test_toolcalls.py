"""Tool-call syntax per template family and reasoning splitting: the real templates shipped
in llama.cpp's tree, rendered with our sandboxed jinja2, and the exact text each family
writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pyllama import _core
from pyllama.chat import ChatTemplate
from pyllama.reasoning import ReasoningStream, opening, split_reasoning, thinking_open
from pyllama.toolcalls import (
    COMMAND_R7B,
    DEEPSEEK,
    FIREFUNCTION,
    GENERIC,
    GRANITE,
    HERMES,
    LLAMA3,
    MISTRAL,
    ToolStream,
    detect_format,
    parse_tool_calls,
    template_context,
    tool_grammar,
    validate_tools,
)

WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}

FAMILIES = {
    "Qwen-Qwen2.5-7B-Instruct": HERMES,
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": HERMES,
    "mistralai-Mistral-Nemo-Instruct-2407": MISTRAL,
    "ibm-granite-granite-3.3-2B-Instruct": GRANITE,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": COMMAND_R7B,
    "fireworks-ai-llama-3-firefunction-v2": FIREFUNCTION,
    "meta-llama-Llama-3.3-70B-Instruct": LLAMA3,
    "meta-llama-Llama-3.1-8B-Instruct": LLAMA3,
    "llama-cpp-deepseek-r1": DEEPSEEK,
    "google-gemma-2-2b-it": GENERIC,
}

# what each family's model writes for get_weather(city="Paris")
WRITTEN = {
    HERMES: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    MISTRAL: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123xyz"}]',
    GRANITE: '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    COMMAND_R7B: '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
    '"parameters": {"city": "Paris"}}]<|END_ACTION|>',
    FIREFUNCTION: 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    LLAMA3: '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
    DEEPSEEK: "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function"
    '<\uff5ctool\u2581sep\uff5c>get_weather\n```json\n{"city": "Paris"}\n```'
    "<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>",
    GENERIC: '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
}


def _template(vendor_models: Path, name: str) -> str:
    return (vendor_models / "templates" / f"{name}.jinja").read_text()


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_detected_and_template_renders_tools(vendor_models: Path, name: str):
    source = _template(vendor_models, name)
    fmt = detect_format(source)
    assert fmt is FAMILIES[name]
    if fmt is GENERIC:
        return
    t = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    tools = [{"type": "function", "function": WEATHER}]
    prompt = t.render(
        [{"role": "user", "content": "Weather in Paris?"}],
        tools=tools,
        **template_context(fmt, tools),
    )
    assert "get_weather" in prompt  # the template itself tells the model about the tool


@pytest.mark.parametrize("fmt", list(WRITTEN), ids=lambda f: f.name)
def test_each_family_parses_whole_and_streamed(fmt):
    text = "Let me check. " + WRITTEN[fmt] if fmt.start else WRITTEN[fmt]
    content, calls = parse_tool_calls(fmt, text)
    assert [c.name for c in calls] == ["get_weather"]
    assert json.loads(calls[0].arguments) == {"city": "Paris"}
    assert content == ("Let me check." if fmt.start else "")

    # streamed in 3-character pieces: the same calls, the same content, no marker leaks
    s = ToolStream(fmt)
    out, got = [], []
    for i in range(0, len(text), 3):
        c, k = s.feed(text[i : i + 3])
        out.append(c)
        got += k
    c, k = s.finish()
    out.append(c)
    got += k
    assert [(g.name, json.loads(g.arguments)) for g in got] == [("get_weather", {"city": "Paris"})]
    streamed = "".join(out).strip()
    assert streamed == content
    if fmt.start:
        assert fmt.start not in streamed


def test_plain_text_stays_content_and_is_streamed_early():
    for fmt in (HERMES, MISTRAL, LLAMA3, GENERIC):
        content, calls = parse_tool_calls(fmt, "Paris is sunny today.")
        assert (content, calls) == ("Paris is sunny today.", [])
    s = ToolStream(HERMES)
    assert s.feed("Hello <tool") == ("Hello ", [])  # the possible marker is held back
    assert s.feed(" no") == ("<tool no", [])


def test_parallel_calls_and_ids():
    text = WRITTEN[HERMES] + "\n" + WRITTEN[HERMES].replace("Paris", "Rome")
    _, calls = parse_tool_calls(HERMES, text)
    assert [json.loads(c.arguments)["city"] for c in calls] == ["Paris", "Rome"]
    assert len({c.id for c in calls}) == 2 and all(len(c.id) == 32 for c in calls)
    _, calls = parse_tool_calls(MISTRAL, WRITTEN[MISTRAL])
    assert calls[0].id == "abc123xyz"  # the model's own id is kept


def test_generic_response_is_content():
    content, calls = parse_tool_calls(GENERIC, '{"response": "It is sunny."}')
    assert (content, calls) == ("It is sunny.", [])


@pytest.mark.parametrize(
    "fmt", [HERMES, MISTRAL, COMMAND_R7B, LLAMA3, GENERIC], ids=lambda f: f.name
)
def test_grammars_compile(fmt, smollm_path):
    """Every family's grammar is valid GBNF for llama.cpp's parser, lazy unless a call is
    required (the generic scheme is never lazy: its reply is always JSON)."""
    model = _core.Model(smollm_path, vocab_only=True)
    for required in (False, True):
        grammar, triggers = tool_grammar(
            fmt, [WEATHER], required, True, _core.json_schema_to_grammar
        )
        assert bool(triggers) == (not required and not fmt.generic)
        if triggers:
            _core.Sampler.grammar_lazy(model, grammar, trigger_patterns=triggers)
        else:
            _core.Sampler.grammar(model, grammar)


def test_bare_json_calls_trigger_only_on_a_call_object():
    _, (pattern,) = tool_grammar(LLAMA3, [WEATHER], False, False, _core.json_schema_to_grammar)
    assert re.fullmatch(pattern, '{"name": "get_weather", "parameters": {')
    assert re.fullmatch(pattern, ' \n{ "name": "x"')
    assert not re.fullmatch(pattern, '{"type": "function"}')
    assert not re.fullmatch(pattern, "print('hello world')")
    assert not re.fullmatch(pattern, 'Here is JSON: {"name": "x"}')
    _, (marked,) = tool_grammar(HERMES, [WEATHER], False, False, _core.json_schema_to_grammar)
    assert re.fullmatch(marked, 'Let me check. <tool_call>{"name"')


def test_validate_tools_names_the_bad_entry():
    with pytest.raises(ValueError, match=r"tools\[1\]"):
        validate_tools([{"type": "function", "function": WEATHER}, {"type": "function"}])
    with pytest.raises(ValueError, match="array"):
        validate_tools({"type": "function"})


def test_reasoning_split_whole_and_streamed():
    """Verbatim, as llama-server: the reasoning between the tags, the content after."""
    assert split_reasoning("<think>\nplan\n</think>\n\nanswer") == ("\nplan\n", "\n\nanswer")
    # the prompt opened the block: its "\n" after the tag starts the reasoning
    assert split_reasoning("plan</think>answer", "<think>\n") == ("\nplan", "answer")
    assert split_reasoning("no thinking here") == ("", "no thinking here")
    assert split_reasoning("<think>cut off") == ("cut off", "")
    assert thinking_open("<|im_start|>assistant\n<think>\n")
    assert (
        opening("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n") == "<think>\n"
    )
    assert opening("<|im_start|>assistant\n<think></think>\n") == ""
    s = ReasoningStream()
    pieces = [s.feed(c) for c in ["<th", "ink>a", "b</th", "ink>", "  c", "d"]] + [s.finish()]
    assert "".join(r for r, _ in pieces) == "ab"
    assert "".join(c for _, c in pieces) == "  cd"
