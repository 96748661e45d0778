"""Every named chat format of a llama_cpp module (llama-cpp-python's, or pyllama's compat
layer) applied to a few conversations, printed as JSON {name: [[prompt, stop,
added_special], ...]}; ``tests/llama_cpp_api/chat_formats.llama_cpp_python.json`` is
llama-cpp-python 0.3.36's output, recorded with (a venv from
benchmarks/llama_cpp_python_venv.sh)::

    ~/.cache/pyllama/bench-lcp-venv/bin/python tests/helpers/chat_formats.py llama_cpp
"""

from __future__ import annotations

import importlib
import json
import sys

# format name -> the formatter's function name (llama-cpp-python calls vicuna's `format`)
FUNCTIONS = {
    "llama-2": "format_llama2", "llama-3": "format_llama3", "alpaca": "format_alpaca",
    "qwen": "format_qwen", "vicuna": "format_vicuna", "oasst_llama": "format_oasst_llama",
    "baichuan-2": "format_baichuan2", "baichuan": "format_baichuan",
    "openbuddy": "format_openbuddy", "redpajama-incite": "format_redpajama_incite",
    "snoozy": "format_snoozy", "phind": "format_phind", "intel": "format_intel",
    "open-orca": "format_open_orca", "mistrallite": "format_mistrallite",
    "zephyr": "format_zephyr", "pygmalion": "format_pygmalion", "chatml": "format_chatml",
    "mistral-instruct": "format_mistral_instruct", "chatglm3": "format_chatglm3",
    "openchat": "format_openchat", "saiga": "format_saiga", "gemma": "format_gemma",
}  # fmt: skip

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Name a colour."},
    ],
    [
        {"role": "user", "content": "One"},
        {"role": "assistant", "content": "Two"},
        {"role": "user", "content": "Three"},
    ],
]


def formats(module: str) -> dict[str, list[list[object]]]:
    mod = importlib.import_module(module + ".llama_chat_format")
    out = {}
    for name, function in FUNCTIONS.items():
        fn = getattr(mod, function, None) or (mod.format if name == "vicuna" else None)
        if fn is None:
            continue
        out[name] = [
            [r.prompt, r.stop, r.added_special]
            for r in (fn(messages=messages) for messages in CONVERSATIONS)
        ]
    return out


if __name__ == "__main__":
    print(json.dumps(formats(sys.argv[1]), indent=1, sort_keys=True))
