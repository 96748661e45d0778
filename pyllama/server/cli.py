"""``pyllama-server``: llama-server's flags (and LLAMA_ARG_* variables) for what pyllama
implements. An unknown flag is an error that names it."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyllama._extras import MissingExtraError, require
from pyllama.server import speculative as spec
from pyllama.server.settings import GcpSettings, Settings

__all__ = ["main", "parse_args"]

_BOOL_TRUE = {"1", "true", "on", "yes", "enabled"}
_BOOL_FALSE = {"0", "false", "off", "no", "disabled"}


def _env_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in _BOOL_TRUE:
        return True
    if v in _BOOL_FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got '{value}'")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"pyllama-server: error: {message}\n(see pyllama-server --help)\n")


def _build() -> tuple[argparse.ArgumentParser, dict[str, tuple[str, Any]]]:
    p = _Parser(
        prog="pyllama-server",
        description="llama-server's REST API (OpenAI, native, Anthropic, Ollama) from Python.",
        allow_abbrev=False,
    )
    envs: dict[str, tuple[str, Any]] = {}  # dest -> (environment variable, converter)

    def flag(*names: str, env: str | None = None, conv: Any = None, **kw: Any) -> None:
        action = p.add_argument(*names, **kw)
        if env:
            envs[action.dest] = (env, conv or kw.get("type") or str)

    def switch(
        on: Sequence[str], off: Sequence[str], dest: str, env: str | None, help: str
    ) -> None:
        flag(*on, dest=dest, action="store_true", default=None, env=env, conv=_env_bool, help=help)
        p.add_argument(*off, dest=dest, action="store_false", help=argparse.SUPPRESS)

    flag("-m", "--model", env="LLAMA_ARG_MODEL", help="GGUF model path (default: the demo model)")
    flag("-a", "--alias", env="LLAMA_ARG_ALIAS", help="model name(s) for the API, comma-separated")
    flag("--tags", env="LLAMA_ARG_TAGS", help="model tags, comma-separated (informational)")
    flag(
        "--offline",
        action="store_true",
        env="LLAMA_OFFLINE",
        conv=_env_bool,
        help="never download (the demo model must already be cached)",
    )
    flag("--host", default="127.0.0.1", env="LLAMA_ARG_HOST")
    flag("--port", type=int, default=8080, env="LLAMA_ARG_PORT")
    flag("-c", "--ctx-size", dest="n_ctx", type=int, default=0, env="LLAMA_ARG_CTX_SIZE")
    flag("-np", "--parallel", dest="n_parallel", type=int, default=-1, env="LLAMA_ARG_N_PARALLEL")
    flag("-b", "--batch-size", dest="n_batch", type=int, default=2048, env="LLAMA_ARG_BATCH")
    flag("-ub", "--ubatch-size", dest="n_ubatch", type=int, default=512, env="LLAMA_ARG_UBATCH")
    flag("-t", "--threads", dest="n_threads", type=int, default=-1, env="LLAMA_ARG_THREADS")
    flag("-tb", "--threads-batch", dest="n_threads_batch", type=int, default=-1)
    flag(
        "-ngl",
        "--gpu-layers",
        "--n-gpu-layers",
        dest="n_gpu_layers",
        default="auto",
        env="LLAMA_ARG_N_GPU_LAYERS",
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
    flag(
        "--temp",
        "--temperature",
        dest="temperature",
        type=float,
        default=0.8,
        env="LLAMA_ARG_TEMPERATURE",
    )
    flag("-s", "--seed", type=int, default=-1)
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
        conv=_env_bool,
    )
    flag(
        "--reranking",
        "--rerank",
        dest="reranking",
        action="store_true",
        env="LLAMA_ARG_RERANKING",
        conv=_env_bool,
    )
    flag("--pooling", choices=["none", "mean", "cls", "last", "rank"], env="LLAMA_ARG_POOLING")
    flag("--metrics", action="store_true", env="LLAMA_ARG_ENDPOINT_METRICS", conv=_env_bool)
    switch(
        ["--slots"],
        ["--no-slots"],
        "slots",
        "LLAMA_ARG_ENDPOINT_SLOTS",
        "expose GET /slots (default: on)",
    )
    flag("--props", action="store_true", env="LLAMA_ARG_ENDPOINT_PROPS", conv=_env_bool)
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
    flag("--lora", action="append", default=[], help="LoRA adapter path(s), comma-separated")
    flag("--lora-scaled", action="append", default=[], help="FNAME:SCALE,...")
    flag("--lora-init-without-apply", action="store_true")
    switch(
        ["--context-shift"],
        ["--no-context-shift"],
        "context_shift",
        "LLAMA_ARG_CONTEXT_SHIFT",
        "shift the context when generation fills it (default: off)",
    )
    flag("--keep", dest="n_keep", type=int, default=0)
    flag("--spm-infill", action="store_true", help="infill: suffix before prefix")
    flag(
        "--no-prefill-assistant",
        dest="prefill_assistant",
        action="store_false",
        env="LLAMA_ARG_NO_PREFILL_ASSISTANT",
        conv=lambda v: not _env_bool(v),
        help="a final assistant message is closed, not continued",
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
    flag(
        "-md",
        "--model-draft",
        "--spec-draft-model",
        dest="model_draft",
        env="LLAMA_ARG_SPEC_DRAFT_MODEL",
    )
    flag("--spec-draft-n-max", type=int, default=3, env="LLAMA_ARG_SPEC_DRAFT_N_MAX")
    flag("--spec-draft-n-min", type=int, default=0, env="LLAMA_ARG_SPEC_DRAFT_N_MIN")
    flag(
        "--spec-draft-p-min",
        "--draft-p-min",
        type=float,
        default=0.0,
        env="LLAMA_ARG_SPEC_DRAFT_P_MIN",
    )
    flag(
        "-bs",
        "--backend-sampling",
        "--backend_sampling",  # the spelling llama.cpp's test suite passes
        action="store_true",
        env="LLAMA_ARG_BACKEND_SAMPLING",
        conv=_env_bool,
        help="accepted for llama-server compatibility; pyllama samples on the host",
    )
    flag("--spec-type", env="LLAMA_ARG_SPEC_TYPE", help="none or draft-simple (comma list)")
    flag("--spec-synth-len", type=float, env="LLAMA_ARG_SPEC_SYNTH_LEN", help="benchmarking")
    flag("--spec-synth-rates", env="LLAMA_ARG_SPEC_SYNTH_RATES", help="benchmarking: P0,P1,...")
    switch(
        ["-cb", "--cont-batching"],
        ["-nocb", "--no-cont-batching"],
        "cont_batching",
        "LLAMA_ARG_CONT_BATCHING",
        "continuous batching (always on in pyllama)",
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
        ["--webui"],
        ["--no-webui", "--no-ui"],
        "webui",
        "LLAMA_ARG_WEBUI",
        "pyllama has no web UI; accepted for compatibility",
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
    flag("--max-queue", type=int, default=256, help="requests waiting for a slot before 503")
    flag("--max-body-bytes", type=int, default=64 << 20, help="larger request bodies get 413")
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
    flag("-v", "--verbose", "--log-verbose", dest="verbose", action="store_true")
    return p, envs


def _split(values: Sequence[str] | str | None) -> list[str]:
    if not values:
        return []
    if isinstance(values, str):
        values = [values]
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


# flags a router keeps to itself: where it listens, who may call it, which models exist
_ROUTER_ONLY = frozenset(
    [
        "--host",
        "--port",
        "--api-key",
        "--api-key-file",
        "--ssl-key-file",
        "--ssl-cert-file",
        "--alias",
        "-a",
        "--tags",
        "--cors-origins",
        "--cors-methods",
        "--cors-headers",
        "--cors-credentials",
        "--no-cors-credentials",
        "--models-dir",
        "--models-preset",
        "--models-max",
        "--models-autoload",
        "--no-models-autoload",
        "--model",
        "-m",
        "--offline",
        # tools are the router's own: children would spawn every MCP server again
        "--tools",
        "--tools-runtime",
        "--mcp-servers-config",
        "--mcp-servers-json",
        "--ui-mcp-proxy",
        "--webui-mcp-proxy",
        "--no-ui-mcp-proxy",
        "--no-webui-mcp-proxy",
        "-ag",
        "--agent",
        "-no-ag",
        "--no-agent",
    ]
)


def _child_args(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """The router's command line minus its own flags: what each model's server inherits."""
    arity = {}
    for action in parser._actions:
        for opt in action.option_strings:
            arity[opt] = action.nargs if action.nargs is not None else 1
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, _ = arg.partition("=")
        n = 0 if eq else arity.get(name, 0)
        n = n if isinstance(n, int) else 1
        if name not in _ROUTER_ONLY:
            out += argv[i : i + 1 + n]
        i += 1 + n
    return out


def parse_args(
    argv: Sequence[str] | None = None, environ: dict[str, str] | None = None
) -> Settings:
    """Flags override LLAMA_ARG_* variables, which override the defaults."""
    parser, envs = _build()
    environ = dict(os.environ if environ is None else environ)
    defaults = {}
    for dest, (var, conv) in envs.items():
        if var in environ:
            try:
                defaults[dest] = conv(environ[var])
            except (ValueError, argparse.ArgumentTypeError) as e:
                parser.error(f"environment variable {var}: {e}")
    parser.set_defaults(**defaults)
    a = parser.parse_args(argv)

    keys = _split(a.api_key)
    if a.api_key_file:
        for line in Path(a.api_key_file).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                keys.append(line)
    template = a.chat_template
    if a.chat_template_file:
        template = Path(a.chat_template_file).read_text()
    kwargs: dict[str, object] = {}
    if a.chat_template_kwargs:
        import json

        try:
            kwargs = json.loads(a.chat_template_kwargs)
        except ValueError as e:
            parser.error(f"--chat-template-kwargs is not JSON: {e}")
        if not isinstance(kwargs, dict):
            parser.error("--chat-template-kwargs must be a JSON object")
    lora = [(path, 0.0 if a.lora_init_without_apply else 1.0) for path in _split(a.lora)]
    for item in _split(a.lora_scaled):
        path, sep, scale = item.rpartition(":")
        if not sep:
            parser.error(f"--lora-scaled expects FNAME:SCALE, got '{item}'")
        try:
            lora.append((path, 0.0 if a.lora_init_without_apply else float(scale)))
        except ValueError:
            parser.error(f"--lora-scaled: '{scale}' is not a number")
    for name in ("n_ubatch", "n_batch"):
        if getattr(a, name) < 1:
            parser.error(f"--{name[2:]}-size must be >= 1")
    if a.n_keep < -1:
        parser.error("--keep must be >= -1")
    if a.cache_ram < -1:
        parser.error("--cache-ram must be >= -1")
    if a.cache_reuse < 0:
        parser.error("--cache-reuse must be >= 0")
    if a.n_parallel == 0 or a.n_parallel < -1:
        parser.error("--parallel must be >= 1 (or -1 for auto)")
    if a.sleep_idle_seconds == 0 or a.sleep_idle_seconds < -1:
        parser.error("--sleep-idle-seconds: cannot be 0 or less than -1")
    router_flags = (a.models_dir, a.models_preset, a.models_max, a.models_autoload)
    router = a.model is None and any(v is not None for v in router_flags)
    if a.models_dir and not Path(a.models_dir).is_dir():
        parser.error(f"--models-dir '{a.models_dir}' does not exist or is not a directory")
    if a.models_preset and not Path(a.models_preset).is_file():
        parser.error(f"--models-preset '{a.models_preset}' does not exist")
    if not _split(a.host):
        parser.error("--host requires at least one address")
    try:
        gcp = GcpSettings.from_env(environ)
    except ValueError:
        parser.error(f"AIP_HTTP_PORT must be a port number, got {environ.get('AIP_HTTP_PORT')!r}")
    spec_types, synth = _speculative(parser, a)
    tools = _split(a.tools) or (["all"] if a.agent else [])
    # tools can read and write files: only pages served from localhost may call them
    agent_tools = bool(tools or a.mcp_servers_config or a.mcp_servers_json)
    return Settings(
        model=a.model,
        alias=sorted(set(_split(a.alias))),  # a set, as llama-server: the first names the model
        tags=sorted(set(_split(a.tags))),
        offline=bool(a.offline),
        host=a.host,
        port=gcp.port if gcp and gcp.port else a.port,  # AIP_HTTP_PORT wins, as llama-server
        n_ctx=a.n_ctx,
        n_parallel=a.n_parallel,
        n_batch=a.n_batch,
        n_ubatch=a.n_ubatch,
        n_threads=a.n_threads,
        n_threads_batch=a.n_threads_batch,
        n_gpu_layers=str(a.n_gpu_layers),
        n_predict=a.n_predict,
        temperature=a.temperature,
        seed=a.seed,
        cache_type_k=a.cache_type_k,
        cache_type_v=a.cache_type_v,
        flash_attn=a.flash_attn,
        kv_unified=a.kv_unified,
        embeddings=bool(a.embeddings),
        reranking=bool(a.reranking),
        pooling=a.pooling,
        metrics=bool(a.metrics),
        slots=a.slots is not False,
        props=bool(a.props),
        slot_save_path=a.slot_save_path,
        api_keys=keys,
        ssl_key_file=a.ssl_key_file,
        ssl_cert_file=a.ssl_cert_file,
        chat_template=template,
        jinja=a.jinja is not False,
        reasoning_format=a.reasoning_format,
        reasoning=a.reasoning,
        chat_template_kwargs=kwargs,
        lora=lora,
        lora_init_without_apply=bool(a.lora_init_without_apply),
        context_shift=bool(a.context_shift),
        spm_infill=a.spm_infill,
        prefill_assistant=a.prefill_assistant is not False,
        n_keep=a.n_keep,
        cache_reuse=a.cache_reuse,
        cache_ram_mib=a.cache_ram,
        cache_idle_slots=a.cache_idle_slots is not False,
        slot_prompt_similarity=a.slot_prompt_similarity,
        model_draft=a.model_draft,
        spec_draft_n_max=a.spec_draft_n_max,
        spec_draft_n_min=a.spec_draft_n_min,
        spec_draft_p_min=a.spec_draft_p_min,
        spec_types=spec_types,
        spec_synth_probs=synth,
        max_queue=a.max_queue,
        max_body_bytes=a.max_body_bytes,
        cors_origins=_split(a.cors_origins) or (["localhost"] if agent_tools else []),
        cors_methods=a.cors_methods,
        cors_headers=a.cors_headers,
        cors_credentials=a.cors_credentials is not False,
        webui=bool(a.webui),
        tools=tools,
        tools_runtime=a.tools_runtime,
        mcp_servers_config=a.mcp_servers_config,
        mcp_servers_json=a.mcp_servers_json,
        ui_mcp_proxy=bool(a.ui_mcp_proxy or a.agent),
        gcp=gcp,
        verbose=bool(a.verbose),
        timeout_s=a.timeout_s,
        sleep_idle_seconds=a.sleep_idle_seconds,
        router=router,
        models_dir=a.models_dir,
        models_preset=a.models_preset,
        models_max=4 if a.models_max is None else a.models_max,
        models_autoload=a.models_autoload is not False,
        child_args=_child_args(parser, list(sys.argv[1:] if argv is None else argv))
        if router
        else [],
    )


def _speculative(parser: argparse.ArgumentParser, a: argparse.Namespace) -> tuple[list, list]:
    """--spec-type and synthetic acceptance, checked as llama-server checks them."""
    try:
        types = spec.parse_types(a.spec_type) if a.spec_type else []
        rates = None
        if a.spec_synth_rates is not None:
            rates = [float(v) for v in a.spec_synth_rates.split(",")]
        drafting = a.model_draft is not None and types != ["none"]
        n_max = a.spec_draft_n_max if drafting else 0
        synth = spec.synth_rates(n_max, a.spec_synth_len, rates)
    except ValueError as e:
        parser.error(f"speculative decoding: {e}")
    if "draft-simple" in types and a.model_draft is None:
        parser.error("--spec-type draft-simple needs a draft model (--model-draft)")
    return types, spec.conditional_probs(synth)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)  # this module imports only the standard library: --help works
    try:
        require("server", "pyllama-server")
    except MissingExtraError as e:
        print(f"pyllama-server: {e}", file=sys.stderr)
        return 1
    from pyllama.server.app import serve

    return serve(settings)
