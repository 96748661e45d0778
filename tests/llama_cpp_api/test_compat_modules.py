"""llama-cpp-python's module layout on pyllama: ``import llama_cpp`` through the opt-in
alias, its submodules (llama_types, llama_chat_format, llama_speculative ...), the named
chat formats and ``register_chat_format`` driving ``Llama(chat_format=...)``."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap

import jinja2
import pytest

from pyllama.compat.llama_cpp import Llama, llama_chat_format, llama_types


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, cwd=tempfile.gettempdir(), timeout=120,
    )  # fmt: skip


def test_the_alias_is_opt_in_and_resolves_every_submodule() -> None:
    r = _python(
        """
        import importlib.util, sys
        import pyllama, pyllama.compat.llama_cpp
        assert importlib.util.find_spec("llama_cpp") is None or "llama_cpp" not in sys.modules
        import pyllama.compat.as_llama_cpp as alias
        alias.install()
        import llama_cpp, llama_cpp.llama_types, llama_cpp.llama_chat_format
        from llama_cpp import Llama, ChatCompletionRequestUserMessage
        from llama_cpp.llama import Llama as L2
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
        from llama_cpp.llama_grammar import LlamaGrammar
        import llama_cpp._internals
        assert llama_cpp is pyllama.compat.llama_cpp and Llama is L2 is pyllama.Llama
        try:
            llama_cpp._internals.LlamaModel
        except AttributeError as e:
            print("internals:", e)
        try:
            llama_cpp.llama_backend_init
        except AttributeError as e:
            print("low-level:", e)
        try:
            import llama_cpp.server
        except ImportError as e:
            print("missing:", e)
        """
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "internals: llama_cpp._internals.LlamaModel: llama-cpp-python's low-level ctypes" in out
    assert "low-level: llama_cpp.llama_backend_init: llama-cpp-python's low-level ctypes" in out
    assert "missing: llama_cpp.server: pyllama's llama_cpp has no such module" in out


def test_the_alias_refuses_a_llama_cpp_already_imported() -> None:
    r = _python(
        """
        import sys, types
        sys.modules["llama_cpp"] = types.ModuleType("llama_cpp")
        import pyllama.compat.as_llama_cpp as alias
        alias.install()
        """
    )
    assert r.returncode != 0
    assert "llama_cpp is already imported" in r.stderr


def test_the_alias_command_runs_a_script(tmp_path) -> None:
    script = tmp_path / "app.py"
    script.write_text("import sys, llama_cpp\nprint(llama_cpp.__name__, sys.argv[1:])\n")
    r = subprocess.run(
        [sys.executable, "-m", "pyllama.compat.as_llama_cpp", str(script), "--flag", "x"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pyllama.compat.llama_cpp ['--flag', 'x']"


MESSAGES = [
    llama_types.ChatCompletionRequestSystemMessage(role="system", content="Be brief."),
    llama_types.ChatCompletionRequestUserMessage(role="user", content="Hi"),
    llama_types.ChatCompletionRequestAssistantMessage(role="assistant", content="Hello!"),
    llama_types.ChatCompletionRequestUserMessage(role="user", content="Name a colour."),
]


def test_named_formats_lay_out_the_turns() -> None:
    f = llama_chat_format
    chatml = f.format_chatml(messages=MESSAGES)
    assert chatml.prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert chatml.stop == "<|im_end|>"
    assert f.format_llama2(messages=MESSAGES).prompt == (
        "[INST] <<SYS>>\nBe brief.\n<</SYS>> Hi [/INST]Hello! </s><s>[INST]Name a colour.  [/INST]"
    )
    assert f.format_alpaca(messages=MESSAGES).prompt == (
        "Be brief.\n\n### Instruction: Hi\n\n### Response: Hello!</s>"
        "### Instruction: Name a colour.\n\n"
    )
    assert f.format_gemma(messages=MESSAGES).prompt == (
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nName a colour.<end_of_turn>\n<start_of_turn>model\n"
    )


def test_mistral_instruct_matches_mistrals_own_template() -> None:
    template = (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
        "{{ '[INST] ' + m['content'] + ' [/INST]' }}{% else %}{{ m['content'] + eos_token }}"
        "{% endif %}{% endfor %}"
    )
    turns = MESSAGES[1:]
    reference = jinja2.Template(template).render(messages=turns, bos_token="<s>", eos_token="</s>")
    response = llama_chat_format.format_mistral_instruct(messages=turns)
    assert not response.added_special  # the tokenizer adds the BOS
    assert "<s>" + response.prompt == reference


def test_a_tokenizer_config_with_added_token_dicts() -> None:
    config = {
        "bos_token": {"content": "<s>", "special": True},
        "eos_token": "</s>",
        "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]"
        "{{ m['content'] }}{% endfor %}",
    }
    formatter = llama_chat_format.hf_tokenizer_config_to_chat_formatter(config)
    response = formatter(messages=[{"role": "user", "content": "Hi"}])
    assert response.prompt == "<s>[user]Hi[assistant]"
    assert response.stop == ["</s>", "<s>"] and response.added_special


def test_a_registered_format_answers_the_chat(smollm_path: str) -> None:
    seen = []

    @llama_chat_format.register_chat_format("pyllama-test-plain")
    def plain(*, messages, **kwargs):
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
        seen.append(text)
        return llama_chat_format.ChatFormatterResponse(prompt=text, stop=["\n"])

    llm = Llama(smollm_path, n_ctx=512, chat_format="pyllama-test-plain", verbose=False)
    assert llm.chat_format == "pyllama-test-plain" and llm.chat_handler is not None
    reply = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Say hi"}], max_tokens=8, temperature=0
    )
    assert seen == ["user: Say hi\nassistant:"]
    n_prompt = len(llm.tokenize(seen[0].encode(), add_bos=True, special=True))
    assert reply["usage"]["prompt_tokens"] == n_prompt
    assert reply["object"] == "chat.completion"
    assert "\n" not in reply["choices"][0]["message"]["content"]  # the format's stop
    chunks = list(
        llm.create_chat_completion(
            messages=[{"role": "user", "content": "Say hi"}],
            max_tokens=8,
            temperature=0,
            stream=True,
        )
    )
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == reply["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == reply["choices"][0]["finish_reason"]


def test_format_names_llama_cpp_has_keep_its_templates(smollm_path: str) -> None:
    # "chatml" is one of llama.cpp's templates: the model path stays on it; "alpaca" is not,
    # so llama-cpp-python's own formatter answers
    assert Llama(smollm_path, n_ctx=256, chat_format="chatml", verbose=False).chat_handler is None
    alpaca = Llama(smollm_path, n_ctx=256, chat_format="alpaca", verbose=False)
    assert alpaca.chat_handler is not None
    reply = alpaca.create_chat_completion(
        messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0
    )
    prompt = llama_chat_format.format_alpaca(messages=[{"role": "user", "content": "Hi"}]).prompt
    assert reply["usage"]["prompt_tokens"] == len(alpaca.tokenize(prompt.encode(), special=True))


def test_an_unknown_format_names_the_known_ones(smollm_path: str) -> None:
    with pytest.raises(ValueError, match=r"chat_format='nope' is not available.*alpaca.*vicuna"):
        Llama(smollm_path, n_ctx=256, chat_format="nope", verbose=False)


def test_old_keywords_integrations_pass_are_honoured(smollm_path: str) -> None:
    sizes = {}
    for f16 in (True, False):
        llm = Llama(smollm_path, n_ctx=256, f16_kv=f16, n_parts=-1, verbose=False)
        llm.eval(llm.tokenize(b"The KV cache of these few tokens"))
        sizes[f16] = len(llm.save_state().llama_state)
    assert sizes[False] > 1.8 * sizes[True]  # f16_kv=False: 32-bit keys and values
    with pytest.raises(ValueError, match="n_parts"):
        Llama(smollm_path, n_ctx=256, n_parts=2, verbose=False)
    with pytest.raises(TypeError, match="unknown keyword arguments: f32_kv"):
        Llama(smollm_path, n_ctx=256, f32_kv=True, verbose=False)


def test_context_and_model_params_read_back(smollm_path: str) -> None:
    llm = Llama(smollm_path, n_ctx=768, n_batch=64, n_threads=1, verbose=False)
    assert llm.context_params.n_ctx == llm.n_ctx() == 768
    assert (llm.context_params.n_batch, llm.context_params.n_threads) == (64, 1)
    assert llm.model_params.use_mmap and not llm.model_params.vocab_only
