"""Every chat template of llama.cpp's corpus (``vendor/llama.cpp/models/templates``, 70
files) answered by pyllama-server as llama-server answers it. Both servers run on the same
tiny random-weight model (SmolLM2's tokenizer, ``tests/fixtures/tiny_vlm.py``) with
``--jinja --chat-template-file T``, greedy; the cases are ``tests/helpers/template_corpus``'s:
``/apply-template`` for a plain, a system, a tool-definition, a tool-call-history and a
reasoning conversation, and chat with tools (auto and required, whole and streamed) on OpenAI
chat, Anthropic Messages and OpenAI Responses. Every answer must equal llama-server's apart
from ids and timings, or be the one deliberate difference (a reply that does not parse as a
tool call: llama-server 500, pyllama 200 with the text as content). Ollama's chat with tools
gives the message the same server's OpenAI chat gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import template_corpus as corpus
from helpers.peer import require_peer
from helpers.servers import PYLLAMA_SERVER

VENDOR = Path(__file__).parents[2] / "vendor" / "llama.cpp"
TEMPLATES = corpus.templates(VENDOR)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    from fixtures.tiny_vlm import write_text_model

    return str(write_text_model(tmp_path_factory.mktemp("corpus") / "model.gguf"))


def test_the_corpus_is_the_vendored_one() -> None:
    assert len(TEMPLATES) >= 70, TEMPLATES


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.stem for t in TEMPLATES])
def test_answers_as_llama_server(tiny_model: str, template: Path) -> None:
    peer = str(require_peer())
    with corpus.both_servers(tiny_model, template, peer, PYLLAMA_SERVER) as (ours, theirs):
        a, b = corpus.ask(ours), corpus.ask(theirs)
        ollama, openai = corpus.ollama_matches_openai(ours)
    verdict = corpus.compare(a, b)
    defects = {k: (a[k], b[k]) for k, v in verdict.items() if v == "x"}
    assert not defects, defects
    assert ollama == openai
