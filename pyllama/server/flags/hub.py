"""llama-server's model sources beside ``-m``: a hub repository (``-hf``, ``-hff``,
``-hft``, the draft's ``-hfd``), a URL (``-mu``), Docker Hub (``-dr``), the cache
listing (``-cl``) and the model presets (``--fim-qwen-7b-default`` ...: a hub model and
the flags that suit it). pyllama resolves hub names through the same cache llama.cpp
uses (``pyllama.hub``); with ``--offline`` the cache alone. Standard library only."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pyllama.server.flags.table import FlagTable

__all__ = ["PRESETS", "add_hub_flags", "hub_options"]

_FIM = {"port": 8012, "n_ubatch": 1024, "n_batch": 1024, "n_ctx": 0, "cache_reuse": 256}
_OSS = {
    "port": 8013,
    "n_ubatch": 2048,
    "n_batch": 32768,
    "n_parallel": 2,
    "n_ctx": 131072 * 2,
    "temperature": 1.0,
    "sampling_top_p": 1.0,
    "sampling_top_k": 0,
    "sampling_min_p": 0.01,
    "jinja": True,
}
_QWEN = "ggml-org/Qwen2.5-Coder-{0}-Q8_0-GGUF"
_DRAFT = {"draft_hf_repo": _QWEN.format("0.5B"), "draft_hf_file": "qwen2.5-coder-0.5b-q8_0.gguf"}


def _fim(size: str, spec: bool = False) -> dict[str, Any]:
    low = size.lower()
    out = {"hf_repo": _QWEN.format(size), "hf_file": f"qwen2.5-coder-{low}-q8_0.gguf", **_FIM}
    return {**out, **_DRAFT} if spec else out


# llama-server's presets (common/arg.cpp): the flags each one stands for
PRESETS: dict[str, dict[str, Any]] = {
    "--embd-gemma-default": {
        "hf_repo": "ggml-org/embeddinggemma-300M-qat-q4_0-GGUF",
        "hf_file": "embeddinggemma-300M-qat-Q4_0.gguf",
        "port": 8011,
        "n_ubatch": 2048,
        "n_batch": 2048,
        "n_parallel": 32,
        "n_ctx": 2048 * 32,
        "embeddings": True,
    },
    "--fim-qwen-1.5b-default": _fim("1.5B"),
    "--fim-qwen-3b-default": _fim("3B"),
    "--fim-qwen-7b-default": _fim("7B"),
    "--fim-qwen-7b-spec": _fim("7B", spec=True),
    "--fim-qwen-14b-spec": _fim("14B", spec=True),
    "--fim-qwen-30b-default": {
        "hf_repo": "ggml-org/Qwen3-Coder-30B-A3B-Instruct-Q8_0-GGUF",
        "hf_file": "qwen3-coder-30b-a3b-instruct-q8_0.gguf",
        **_FIM,
    },
    "--gpt-oss-20b-default": {
        "hf_repo": "ggml-org/gpt-oss-20b-GGUF",
        "hf_file": "gpt-oss-20b-mxfp4.gguf",
        **_OSS,
    },
    "--gpt-oss-120b-default": {"hf_repo": "ggml-org/gpt-oss-120b-GGUF", **_OSS},
    "--vision-gemma-4b-default": {
        "hf_repo": "ggml-org/gemma-3-4b-it-qat-GGUF",
        "port": 8014,
        "n_ctx": 0,
        "jinja": True,
    },
    "--vision-gemma-12b-default": {
        "hf_repo": "ggml-org/gemma-3-12b-it-qat-GGUF",
        "port": 8014,
        "n_ctx": 0,
        "jinja": True,
    },
    # llama.cpp's default speculative decoding: ngram-mod, added to --spec-type's kinds
    "--spec-default": {
        "spec_type": "+ngram-mod",
        "spec_ngram_mod_n_match": 24,
        "spec_ngram_mod_n_min": 48,
        "spec_ngram_mod_n_max": 64,
    },
}


class _Preset(argparse.Action):
    """Set the preset's values where the flag stands: later flags still win."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, *_: Any) -> None:
        for key, value in PRESETS[self.option_strings[0]].items():
            if isinstance(value, str) and value.startswith("+"):  # appended to a list flag
                before = getattr(ns, key, None)
                value = f"{before},{value[1:]}" if before else value[1:]
            setattr(ns, key, value)


class _CacheList(argparse.Action):
    """``-cl``: the cached hub models, as llama-server lists them, then exit."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from pyllama import hub

        models = hub.list_cached()
        print(f"number of models in cache: {len(models)}")
        for i, m in enumerate(models, 1):
            print(f"{i:4d}. {m.name}")
        parser.exit(0)


def add_hub_flags(t: FlagTable) -> None:
    flag = t.flag
    t.section("common")
    flag("-cl", "--cache-list", action=_CacheList, help="list the models in the cache and exit")
    flag(
        "-mu",
        "--model-url",
        env="LLAMA_ARG_MODEL_URL",
        metavar="MODEL_URL",
        help="download the model from this URL into the cache (once)",
    )
    flag(
        "-dr",
        "--docker-repo",
        env="LLAMA_ARG_DOCKER_REPO",
        metavar="[<repo>/]<model>[:quant]",
        help="a Docker Hub model (not supported by pyllama: an error naming it)",
    )
    flag(
        "-hf",
        "-hfr",
        "--hf-repo",
        dest="hf_repo",
        env="LLAMA_ARG_HF_REPO",
        metavar="<user>/<model>[:quant]",
        help="a Hugging Face model, from the cache or downloaded into it",
    )
    flag(
        "-hff",
        "--hf-file",
        dest="hf_file",
        env="LLAMA_ARG_HF_FILE",
        metavar="FILE",
        help="the repository's file to use (overrides the quant in --hf-repo)",
    )
    flag(
        "-hft",
        "--hf-token",
        dest="hf_token",
        env="HF_TOKEN",
        metavar="TOKEN",
        help="Hugging Face access token (default: $HF_TOKEN)",
    )
    t.section("speculative")
    flag(
        "--spec-draft-hf",
        "-hfd",
        "-hfrd",
        "--hf-repo-draft",
        dest="draft_hf_repo",
        env="LLAMA_ARG_SPEC_DRAFT_HF_REPO",
        metavar="<user>/<model>[:quant]",
        help="the draft model from the hub, as --hf-repo",
    )
    t.section("server")
    for name, values in PRESETS.items():
        what = values.get("hf_repo", "n-gram speculative decoding")
        flag(name, action=_Preset, help=f"preset: {what} (from the cache or the hub)")


def _check_repo(flag: str, value: str) -> None:
    repo = value.partition(":")[0]
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ValueError(f"{flag}: expected <user>/<model>[:quant], got '{value}'")


def hub_options(a: argparse.Namespace) -> dict[str, object]:
    """Settings fields; ValueError names a source pyllama cannot use."""
    if a.docker_repo:
        from pyllama.server.docker_repo import split_docker_repo

        split_docker_repo(a.docker_repo)
    for name, value in (("--hf-repo", a.hf_repo), ("--spec-draft-hf", a.draft_hf_repo)):
        if value:
            _check_repo(name, value)
    return {
        "hf_repo": a.hf_repo,
        "hf_file": getattr(a, "hf_file", None),
        "hf_token": a.hf_token,
        "model_url": a.model_url,
        "docker_repo": a.docker_repo,
        "draft_hf_repo": a.draft_hf_repo,
        "draft_hf_file": getattr(a, "draft_hf_file", None),
    }
