"""llama-server's flags, as argparse declares them: names, defaults, the LLAMA_ARG_*
variable that sets each, and the help text. What they mean for the server is decided in
``cli.parse_args``; ``--list-devices`` acts at once, as llama-server's does."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from pyllama.server.flags.batch import add_batch_flags
from pyllama.server.flags.cpu import add_cpu_flags
from pyllama.server.flags.http import add_http_flags
from pyllama.server.flags.hub import add_hub_flags
from pyllama.server.flags.info import add_info_flags
from pyllama.server.flags.logs import add_log_flags
from pyllama.server.flags.model import add_model_flags
from pyllama.server.flags.sampling import add_sampling_flags
from pyllama.server.flags.speculative import add_speculative_flags
from pyllama.server.flags.table import FlagTable, env_bool

__all__ = ["build_parser", "env_bool"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"pyllama-server: error: {message}\n(see pyllama-server --help)\n")


def add_rpc_servers(parser: argparse.ArgumentParser, value: str) -> None:
    """--rpc: each server's devices added before the model loads, as llama-server adds
    them while it parses; a server that does not answer is an error, not an abort."""
    from pyllama import rpc  # the compiled module: only when asked

    try:
        rpc.add_servers(rpc.parse_endpoints(value))
    except (ValueError, RuntimeError) as e:
        parser.error(f"--rpc: {e}")


class _ListDevices(argparse.Action):
    """``--list-devices``: what llama-server prints (the devices other than the CPU), then
    exit at once, as llama-server does while it parses."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kw: Any) -> None:
        from pyllama.hardware import devices  # the compiled module: only when asked

        rpc = getattr(args[0], "rpc", None) if args else None
        if rpc:  # given before --list-devices, as llama-server lists them then
            add_rpc_servers(parser, rpc)

        mib = 1024 * 1024
        lines = ["Available devices:"]
        lines += [
            f"  {d.name}: {d.description} ({d.memory_total // mib} MiB, {d.memory_free // mib} MiB free)"
            for d in devices()
            if d.type != "cpu"
        ] or ["  (none)"]
        print("\n".join(lines), flush=True)  # on stdout, as llama-server's printf
        parser.exit(0)


def _multimodal_flags(flag: Any, switch: Any) -> None:
    """llama-server's --mmproj family and --media-path (cli.parse_args checks them)."""
    flag(
        "-mm", "--mmproj", env="LLAMA_ARG_MMPROJ", help="multimodal projector file (images, audio)"
    )
    flag("-mmu", "--mmproj-url", env="LLAMA_ARG_MMPROJ_URL", help="URL of a projector file")
    switch(
        ["--mmproj-auto"],
        ["--no-mmproj", "--no-mmproj-auto"],
        "mmproj_auto",
        "LLAMA_ARG_MMPROJ_AUTO",
        "use the projector found beside a hub or --models-dir model (default: on)",
    )
    switch(
        ["--mmproj-offload"],
        ["--no-mmproj-offload"],
        "mmproj_offload",
        "LLAMA_ARG_MMPROJ_OFFLOAD",
        "run the projector on the GPU (default: on)",
    )
    flag("-mmdev", "--mmproj-device", env="MTMD_BACKEND_DEVICE", help="projector's device, or none")
    for bound in ("min", "max"):
        flag(
            f"--image-{bound}-tokens",
            type=int,
            default=-1,
            env=f"LLAMA_ARG_IMAGE_{bound.upper()}_TOKENS",
            help=f"{bound}imum tokens per image (dynamic-resolution models; default: the file's)",
        )
    flag(
        "--mtmd-batch-max-tokens",
        type=int,
        default=1024,
        env="LLAMA_ARG_MTMD_BATCH_MAX_TOKENS",
        help="image tokens per encoder batch (default: 1024)",
    )
    flag("--media-path", help="directory that file:// media URLs are read from (default: none)")
    flag(
        "--media-allow-private",
        action="store_true",
        env="PYLLAMA_MEDIA_ALLOW_PRIVATE",
        conv=env_bool,
        help="pyllama: allow http(s) media URLs to loopback and private addresses (default: refused)",
    )


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, tuple[str, Any]]]:
    """The parser, and for each flag that a variable can set: (variable, converter)."""
    p = _Parser(
        prog="pyllama-server",
        description="llama-server's REST API (OpenAI, native, Anthropic, Ollama) from Python.",
        usage="%(prog)s [options]",
        allow_abbrev=False,
    )
    t = FlagTable(p)
    flag, switch, section = t.flag, t.switch, t.section

    flag("-m", "--model", env="LLAMA_ARG_MODEL", help="GGUF model path (default: the demo model)")
    flag("--list-devices", action=_ListDevices, help="print the available devices and exit")
    section("server")
    flag("-a", "--alias", env="LLAMA_ARG_ALIAS", help="model name(s) for the API, comma-separated")
    flag("--tags", env="LLAMA_ARG_TAGS", help="model tags, comma-separated (informational)")
    section("common")
    flag(
        "--offline",
        action="store_true",
        env="LLAMA_ARG_OFFLINE",
        conv=env_bool,
        help="never download (the demo model must already be cached)",
    )
    section("server")
    flag("--host", default="127.0.0.1", env="LLAMA_ARG_HOST")
    flag("--port", type=int, default=8080, env="LLAMA_ARG_PORT")
    section("common")
    flag("-c", "--ctx-size", dest="n_ctx", type=int, default=0, env="LLAMA_ARG_CTX_SIZE")
    section("server")
    flag("-np", "--parallel", dest="n_parallel", type=int, default=-1, env="LLAMA_ARG_N_PARALLEL")
    section("common")
    flag("-b", "--batch-size", dest="n_batch", type=int, default=2048, env="LLAMA_ARG_BATCH")
    flag("-ub", "--ubatch-size", dest="n_ubatch", type=int, default=512, env="LLAMA_ARG_UBATCH")
    flag("-t", "--threads", dest="n_threads", type=int, default=-1, env="LLAMA_ARG_THREADS")
    flag("-tb", "--threads-batch", dest="n_threads_batch", type=int, default=-1)
    # offload flags default to None so that parse_args can tell a given flag from a default
    flag(
        "-ngl",
        "--gpu-layers",
        "--n-gpu-layers",
        dest="n_gpu_layers",
        default=None,
        env="LLAMA_ARG_N_GPU_LAYERS",
        help="layers to store in VRAM: a number, 'auto' or 'all' (default: auto)",
    )
    flag(
        "--rpc",
        env="LLAMA_ARG_RPC",
        metavar="SERVERS",
        help="RPC servers, comma-separated host:port (pyllama-rpc-server or llama.cpp's "
        "rpc-server): their devices join --device, -ngl and --tensor-split",
    )
    flag(
        "-dev",
        "--device",
        env="LLAMA_ARG_DEVICE",
        help="devices to offload to, comma-separated (none: no offload; see --list-devices)",
    )
    flag(
        "-sm",
        "--split-mode",
        choices=["none", "layer", "row", "tensor"],
        env="LLAMA_ARG_SPLIT_MODE",
        help="how to split the model across GPUs (default: layer)",
    )
    flag(
        "-ts",
        "--tensor-split",
        env="LLAMA_ARG_TENSOR_SPLIT",
        help="proportion of the model per GPU, comma-separated, e.g. 3,1",
    )
    flag(
        "-mg",
        "--main-gpu",
        type=int,
        env="LLAMA_ARG_MAIN_GPU",
        help="the GPU for the whole model (split-mode none) or for KV and results (row)",
    )
    flag(
        "-n",
        "--predict",
        "--n-predict",
        dest="n_predict",
        type=int,
        default=-1,
        env="LLAMA_ARG_N_PREDICT",
    )
    section("sampling")
    flag(
        "--temp",
        "--temperature",
        dest="temperature",
        type=float,
        default=0.8,
        env="LLAMA_ARG_TEMPERATURE",
    )
    flag("-s", "--seed", type=int, default=-1)
    section("common")
    flag("-ctk", "--cache-type-k", dest="cache_type_k", default="f16", env="LLAMA_ARG_CACHE_TYPE_K")
    flag("-ctv", "--cache-type-v", dest="cache_type_v", default="f16", env="LLAMA_ARG_CACHE_TYPE_V")
    flag(
        "-fa",
        "--flash-attn",
        dest="flash_attn",
        default="auto",
        choices=["on", "off", "auto"],
        env="LLAMA_ARG_FLASH_ATTN",
    )
    section("server")
    switch(
        ["-kvu", "--kv-unified"],
        ["-no-kvu", "--no-kv-unified"],
        "kv_unified",
        "LLAMA_ARG_KV_UNIFIED",
        "one KV buffer shared by all slots",
    )
    flag(
        "--embedding",
        "--embeddings",
        dest="embeddings",
        action="store_true",
        env="LLAMA_ARG_EMBEDDINGS",
        conv=env_bool,
    )
    flag(
        "--reranking",
        "--rerank",
        dest="reranking",
        action="store_true",
        env="LLAMA_ARG_RERANKING",
        conv=env_bool,
    )
    flag("--pooling", choices=["none", "mean", "cls", "last", "rank"], env="LLAMA_ARG_POOLING")
    flag("--metrics", action="store_true", env="LLAMA_ARG_ENDPOINT_METRICS", conv=env_bool)
    flag(
        "--metrics-public",
        action="store_true",
        env="PYLLAMA_METRICS_PUBLIC",
        conv=env_bool,
        help="pyllama: answer GET /metrics without the --api-key (for scrapers that cannot "
        "send one, such as a gateway's endpoint picker); every other route still needs it",
    )
    switch(
        ["--slots"],
        ["--no-slots"],
        "slots",
        "LLAMA_ARG_ENDPOINT_SLOTS",
        "expose GET /slots (default: on)",
    )
    flag("--props", action="store_true", env="LLAMA_ARG_ENDPOINT_PROPS", conv=env_bool)
    flag("--slot-save-path")
    flag("--api-key", env="LLAMA_API_KEY", help="comma-separated keys")
    flag("--api-key-file", env="LLAMA_ARG_API_KEY_FILE")
    flag("--ssl-key-file", env="LLAMA_ARG_SSL_KEY_FILE")
    flag("--ssl-cert-file", env="LLAMA_ARG_SSL_CERT_FILE")
    flag("--chat-template", env="LLAMA_ARG_CHAT_TEMPLATE")
    flag("--chat-template-file", env="LLAMA_ARG_CHAT_TEMPLATE_FILE")
    flag("--chat-template-kwargs", env="LLAMA_ARG_CHAT_TEMPLATE_KWARGS")
    switch(
        ["--jinja"],
        ["--no-jinja"],
        "jinja",
        "LLAMA_ARG_JINJA",
        "jinja chat templates (default: on)",
    )
    flag(
        "--reasoning-format",
        default="auto",
        choices=["none", "deepseek", "deepseek-legacy", "auto"],
        env="LLAMA_ARG_THINK",
    )
    flag(
        "-rea",
        "--reasoning",
        default="auto",
        choices=["on", "off", "auto"],
        env="LLAMA_ARG_REASONING",
        help="thinking in templates that support it (off: an empty, closed block)",
    )
    section("common")
    flag("--lora", action="append", default=[], help="LoRA adapter path(s), comma-separated")
    flag("--lora-scaled", action="append", default=[], help="FNAME:SCALE,...")
    section("server")
    flag("--lora-init-without-apply", action="store_true")
    switch(
        ["--context-shift"],
        ["--no-context-shift"],
        "context_shift",
        "LLAMA_ARG_CONTEXT_SHIFT",
        "shift the context when generation fills it (default: off)",
    )
    section("common")
    flag("--keep", dest="n_keep", type=int, default=0)
    section("server")
    flag("--spm-infill", action="store_true", help="infill: suffix before prefix")
    switch(
        ["--prefill-assistant"],
        ["--no-prefill-assistant"],
        "prefill_assistant",
        "LLAMA_ARG_PREFILL_ASSISTANT",
        "continue a final assistant message (default: on; off: it is closed)",
    )
    flag("--cache-reuse", type=int, default=0, env="LLAMA_ARG_CACHE_REUSE")
    flag(
        "-cram",
        "--cache-ram",
        type=int,
        default=8192,
        env="LLAMA_ARG_CACHE_RAM",
        help="host-memory prompt cache in MiB (0: off, -1: no limit)",
    )
    switch(
        ["--cache-idle-slots"],
        ["--no-cache-idle-slots"],
        "cache_idle_slots",
        "LLAMA_ARG_CACHE_IDLE_SLOTS",
        "save idle slots to the prompt cache on a new task (cleared with a unified KV cache)",
    )
    flag("-sps", "--slot-prompt-similarity", type=float, default=0.1)
    section("speculative")
    flag(
        "-md",
        "--model-draft",
        "--spec-draft-model",
        dest="model_draft",
        env="LLAMA_ARG_SPEC_DRAFT_MODEL",
    )
    section("server")
    _multimodal_flags(flag, switch)
    section("sampling")
    add_sampling_flags(flag)
    section("speculative")
    flag("--spec-draft-n-max", type=int, default=3, env="LLAMA_ARG_SPEC_DRAFT_N_MAX")
    flag("--spec-draft-n-min", type=int, default=0, env="LLAMA_ARG_SPEC_DRAFT_N_MIN")
    flag(
        "--spec-draft-p-min",
        "--draft-p-min",
        type=float,
        default=0.0,
        env="LLAMA_ARG_SPEC_DRAFT_P_MIN",
    )
    section("sampling")
    flag(
        "-bs",
        "--backend-sampling",
        "--backend_sampling",  # the spelling llama.cpp's test suite passes
        action="store_true",
        env="LLAMA_ARG_BACKEND_SAMPLING",
        conv=env_bool,
        help="sample inside the decode graph by default (a request's backend_sampling); "
        "a grammar, a reasoning budget or n_probs without post_sampling_probs keep it on the host",
    )
    flag(
        "--host-greedy",
        action="store_true",
        env="PYLLAMA_HOST_GREEDY",
        conv=env_bool,
        help="pyllama: pick greedy tokens on the host, as llama-server without -bs (default, "
        "with 8 slots or more: in the decode graph where the logits are on the CPU, the same "
        "tokens without reading each sequence's logits back)",
    )
    section("speculative")
    flag("--spec-type", env="LLAMA_ARG_SPEC_TYPE", help="none or draft-simple (comma list)")
    flag("--spec-synth-len", type=float, env="LLAMA_ARG_SPEC_SYNTH_LEN", help="benchmarking")
    flag("--spec-synth-rates", env="LLAMA_ARG_SPEC_SYNTH_RATES", help="benchmarking: P0,P1,...")
    section("server")
    switch(
        ["-cb", "--cont-batching"],
        ["-nocb", "--no-cont-batching"],
        "cont_batching",
        "LLAMA_ARG_CONT_BATCHING",
        "continuous batching: new prompts evaluated beside generating slots (default: on)",
    )
    flag(
        "--cors-origins",
        env="LLAMA_ARG_CORS_ORIGINS",
        help="comma-separated origins allowed by CORS (default: none, CORS off); "
        "'localhost' allows any localhost origin, '*' any origin without credentials",
    )
    flag("--cors-methods", default="GET, POST, DELETE, OPTIONS", env="LLAMA_ARG_CORS_METHODS")
    flag("--cors-headers", default="*", env="LLAMA_ARG_CORS_HEADERS")
    switch(
        ["--cors-credentials"],
        ["--no-cors-credentials"],
        "cors_credentials",
        "LLAMA_ARG_CORS_CREDENTIALS",
        "allow credentials for the listed origins (default: on; never with '*')",
    )
    switch(
        ["--ui", "--webui"],
        ["--no-webui", "--no-ui"],
        "webui",
        "LLAMA_ARG_UI",
        "the chat page at / for browsers (default: on; other clients get Ollama's answer "
        "there); --path replaces it",
    )
    flag(
        "--tools",
        env="LLAMA_ARG_TOOLS",
        help="experimental: built-in tools for agents on /tools, comma-separated, or 'all' "
        "(read_file, file_glob_search, grep_search, exec_shell_command, write_file, edit_file, "
        "get_info); do not enable in untrusted environments. Limits --cors-origins to "
        "localhost by default",
    )
    flag(
        "--tools-runtime",
        default="",
        env="LLAMA_ARG_TOOLS_RUNTIME",
        help="experimental: run tools in docker:<image>, podman:<image>, "
        "docker-container:<id>, podman-container:<id> or ssh:<target>",
    )
    flag(
        "--mcp-servers-config",
        env="LLAMA_ARG_MCP_SERVERS_CONFIG",
        help="experimental: a JSON file of MCP servers (Cursor's mcpServers format), whose "
        "tools are served on /tools. Limits --cors-origins to localhost by default",
    )
    flag(
        "--mcp-servers-json",
        env="LLAMA_ARG_MCP_SERVERS_JSON",
        help="experimental: the same MCP server definitions, inline",
    )
    switch(
        ["--ui-mcp-proxy", "--webui-mcp-proxy"],
        ["--no-ui-mcp-proxy", "--no-webui-mcp-proxy"],
        "ui_mcp_proxy",
        "LLAMA_ARG_UI_MCP_PROXY",
        "experimental: the /cors-proxy the web UI uses to reach MCP servers (default: off)",
    )
    switch(
        ["-ag", "--agent"],
        ["-no-ag", "--no-agent"],
        "agent",
        "LLAMA_ARG_AGENT",
        "the CORS proxy and all built-in tools; limits --cors-origins to localhost by default",
    )
    section("pyllama")
    flag("--max-queue", type=int, default=256, help="requests waiting for a slot before 503")
    flag("--max-body-bytes", type=int, default=64 << 20, help="larger request bodies get 413")
    switch(
        ["--prefix-share"],
        ["--no-prefix-share"],
        "prefix_share",
        "PYLLAMA_PREFIX_SHARE",
        "a prompt prefix another slot holds or is evaluating is copied from it, not evaluated "
        "again (default: on)",
    )
    flag(
        "--prefix-share-min",
        type=int,
        default=32,
        help="fewest tokens a shared prefix must save (default: 32)",
    )
    flag(
        "--embd-step-tokens",
        type=int,
        default=-1,
        help="an embedding decode takes more inputs only while it holds at most this many "
        "tokens; an input alone still goes whole (default: -1, n_embd/2 for an encoder such as "
        "BERT, else no cap; 0: no cap)",
    )
    section("server")
    flag("-to", "--timeout", dest="timeout_s", type=float, default=3600.0, env="LLAMA_ARG_TIMEOUT")
    flag("--models-dir", env="LLAMA_ARG_MODELS_DIR", help="router mode: a directory of GGUF models")
    flag(
        "--models-preset", env="LLAMA_ARG_MODELS_PRESET", help="router mode: an INI file of models"
    )
    flag(
        "--models-max",
        type=int,
        default=None,
        env="LLAMA_ARG_MODELS_MAX",
        help="router mode: models loaded at once (default 4, 0: no limit)",
    )
    switch(
        ["--models-autoload"],
        ["--no-models-autoload"],
        "models_autoload",
        "LLAMA_ARG_MODELS_AUTOLOAD",
        "router mode: load a model when a request names it (default on)",
    )
    flag(
        "--sleep-idle-seconds",
        type=int,
        default=-1,
        env="LLAMA_ARG_SLEEP_IDLE_SECONDS",
        help="free the model after this many idle seconds, reload it on the next request (-1: never)",
    )
    section("common")
    flag("-v", "--verbose", "--log-verbose", dest="verbose", action="store_true")
    add_info_flags(t)
    add_model_flags(t)
    add_log_flags(t)
    add_http_flags(t)
    add_hub_flags(t)
    add_cpu_flags(t)
    add_speculative_flags(t)
    add_batch_flags(t)
    return p, t.envs
