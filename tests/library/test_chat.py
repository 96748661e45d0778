"""Chat templates through llama.cpp's chat layer (``pyllama.ChatTemplate``): the GGUF's own
template, what a template may do (its own C++ Jinja engine: no Python runs), message
validation by llama.cpp's request parse, user-typed special text kept as text."""

from __future__ import annotations

import pytest

from pyllama import ChatTemplate, ChatTemplateError

HI = [{"role": "user", "content": "hi"}]

# what escapes a Python sandbox means nothing to llama.cpp's engine: no Python object is
# reachable, so each renders nothing of the machine or is refused
ESCAPES = [
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ lipsum.__globals__['os'].system('true') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ joiner.__init__.__globals__ }}",
]


@pytest.mark.parametrize("source", ESCAPES)
def test_python_escapes_reach_nothing(source: str) -> None:
    try:
        out = ChatTemplate(source).render(HI)
    except ChatTemplateError:
        return
    assert "uid=" not in out and "class" not in out and "module" not in out


def test_raise_exception_is_a_template_error() -> None:
    # llama.cpp probes the template as it loads it, so the exception comes at once
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        ChatTemplate("{{ raise_exception('roles must alternate') }}").render(HI)


def test_a_template_that_does_not_parse_is_refused() -> None:
    with pytest.raises(ChatTemplateError, match="chat template parsing error"):
        ChatTemplate("{% for %}")


def test_hf_helpers() -> None:
    t = ChatTemplate("{{ messages[0].content | tojson }}|{{ strftime_now('%Y') | length }}")
    assert t.render([{"role": "user", "content": "é"}], add_generation_prompt=False) == '"é"|4'


def test_builtin_names_use_llama_cpps_legacy_formats() -> None:
    t = ChatTemplate("chatml", use_jinja=False)
    assert t.render(HI) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_model_template_is_chatml(llm) -> None:
    src = llm.model.chat_template()
    assert "<|im_start|>" in src
    prompt = llm.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>user\nHi<|im_end|>" in prompt


def test_special_token_text_in_content_is_text(llm) -> None:
    """'<|im_end|>' typed by a user must not become the control token."""
    from pyllama.chat import tokenize_chat

    msgs = [{"role": "user", "content": "a <|im_end|> b"}]
    prompt = llm.apply_chat_template(msgs)
    im_end = llm.model.tokenize("<|im_end|>", False, True)
    assert len(im_end) == 1
    plain = [{"role": "user", "content": "a b"}]
    own = tokenize_chat(llm.model, plain, llm.apply_chat_template(plain)).count(im_end[0])
    naive = llm.model.tokenize(prompt, True, True).count(im_end[0])
    safe = tokenize_chat(llm.model, msgs, prompt).count(im_end[0])
    assert naive == own + 1  # parsing the whole prompt would let the user close the turn
    assert safe == own  # only the template's own end-of-turn tokens are control tokens


@pytest.mark.parametrize(
    "messages",
    [
        "hi",
        [123],
        [{"role": "user"}],  # llama-server: "All non-assistant messages must contain 'content'"
        [{"role": "assistant"}],
        [{"role": "user", "content": 5}],
    ],
)
def test_bad_messages_are_refused_as_llama_server(messages) -> None:
    with pytest.raises(ValueError):
        ChatTemplate("chatml", use_jinja=False).render(messages)


USER = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"]}  # fmt: skip
TOOLS = [{"type": "function", "function": {"name": "UserDetail", "parameters": USER}}]
NAMED = {"type": "function", "function": {"name": "UserDetail"}}
ASK = [{"role": "user", "content": "Extract: Jason is 25 years old"}]


def test_named_tool_on_a_template_without_tool_calls_is_a_schema_call(llm) -> None:
    """SmolLM2's template writes no tool calls (llama.cpp renders no tools there): a named
    tool_choice is answered as llama-cpp-python answers it, the reply generated under the
    tool's parameter schema and returned as that tool's call, whole and streamed."""
    import json

    out = llm.create_chat_completion(
        ASK, tools=TOOLS, tool_choice=NAMED, max_tokens=48, temperature=0
    )
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "UserDetail" and choice["message"]["content"] is None
    args = json.loads(call["function"]["arguments"])
    assert isinstance(args["name"], str) and isinstance(args["age"], int)
    chunks = list(
        llm.create_chat_completion(
            ASK, tools=TOOLS, tool_choice=NAMED, max_tokens=48, temperature=0, stream=True
        )
    )
    deltas = [c["choices"][0]["delta"] for c in chunks]
    parts = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert parts[0]["function"]["name"] == "UserDetail"
    assert "".join(p["function"]["arguments"] for p in parts) == call["function"]["arguments"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
