"""Chat templates: the GGUF's own template, the sandbox, message validation."""

from __future__ import annotations

import sys
import time

import pytest

from pyllama import ChatTemplate, ChatTemplateError
from pyllama.chat import validate_messages

ESCAPES = [
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ lipsum.__globals__['os'].system('true') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ joiner.__init__.__globals__ }}",
    # a message (a dict) stays immutable; lists take append and pop as in llama.cpp, on the
    # render's own copy (tests/server/test_vendor_templates_vs_peer.py)
    "{% set x = messages[0].update({'role': 'user'}) %}{{ x }}",
]


@pytest.mark.parametrize("source", ESCAPES)
def test_sandbox_refuses_escapes(source):  # item 18
    with pytest.raises(ChatTemplateError):
        ChatTemplate(source).render([{"role": "user", "content": "hi"}])


def test_output_bound():  # item 19
    t = ChatTemplate("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", max_output=100_000)
    with pytest.raises(ChatTemplateError, match="exceeds"):
        t.render([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(
    "source,reason",
    [
        # 10^10 empty iterations: nothing is produced, so only the time bound can stop it
        (
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
            "longer",
        ),
        ("{{ 'x' * 10000000000 }}", "exceeds"),  # one operation, 10 GB
        (
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
            "{% endfor %}",
            "exceeds",
        ),  # doubling
        ("{{ 10 ** 10000000000 }}", "exponent"),  # a single C operation that never ends
    ],
)
def test_runaway_templates_are_bounded(source, reason):  # item 19
    t = ChatTemplate(source, max_seconds=0.5)
    tracer = sys.gettrace()  # coverage's or a debugger's, if any
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match=reason):
        t.render([{"role": "user", "content": "hi"}])
    assert time.monotonic() - t0 < 10  # 0.5 s bound; generous for a loaded machine
    assert sys.gettrace() is tracer  # the render put it back
    assert ChatTemplate("{{ 'a' * 3 + 'b' }}{{ 2 ** 5 }}").render([]) == "aaab32"


def test_raise_exception_helper():
    t = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        t.render([{"role": "user", "content": "hi"}])


def test_hf_helpers():
    t = ChatTemplate("{{ messages | tojson }}|{{ strftime_now('%Y') | length }}")
    out = t.render([{"role": "user", "content": "é"}])
    assert out == '[{"role": "user", "content": "é"}]|4'


def test_model_template_is_chatml(llm):
    src = llm.model.chat_template()
    assert "<|im_start|>" in src
    prompt = llm.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>user\nHi<|im_end|>" in prompt


def test_special_token_text_in_content_is_text(llm):
    """'<|im_end|>' typed by a user must not become the control token."""
    from pyllama.chat import tokenize_chat, validate_messages

    msgs = validate_messages([{"role": "user", "content": "a <|im_end|> b"}])
    prompt = llm.apply_chat_template(msgs)
    im_end = llm.model.tokenize("<|im_end|>", False, True)
    assert len(im_end) == 1
    plain = validate_messages([{"role": "user", "content": "a b"}])
    own = tokenize_chat(llm.model, plain, llm.apply_chat_template(plain)).count(im_end[0])
    naive = llm.model.tokenize(prompt, True, True).count(im_end[0])
    safe = tokenize_chat(llm.model, msgs, prompt).count(im_end[0])
    assert naive == own + 1  # parsing the whole prompt would let the user close the turn
    assert safe == own  # only the template's own end-of-turn tokens are control tokens


@pytest.mark.parametrize(
    "messages",
    [
        None,
        "hi",
        [],
        [123],
        [{}],
        [{"role": 123, "content": "x"}],
        [{"role": "wizard", "content": "x"}],
        [{"role": "user", "content": 5}],
    ],
)
def test_bad_messages(messages):
    with pytest.raises(ValueError):
        validate_messages(messages)
