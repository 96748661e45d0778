"""``pyllama-server``: its command line (flags and LLAMA_ARG_* variables, declared in
``flags``) made into one ``Settings``, the flags a router passes to its children, and the
entry point. An unknown flag is an error that names it."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence

from pyllama._extras import MissingExtraError, require
from pyllama.server import speculative as spec
from pyllama.server.flags import add_rpc_servers, build_parser, env_bool
from pyllama.server.flags.batch import batch_options
from pyllama.server.flags.cpu import DEFAULT_POLL, cpu_placements, polls_set
from pyllama.server.flags.http import http_options, unescape
from pyllama.server.flags.hub import hub_options
from pyllama.server.flags.logs import log_options
from pyllama.server.flags.mode import choose as choose_mode
from pyllama.server.flags.model import model_options
from pyllama.server.flags.paths import is_dir, is_file, read_text
from pyllama.server.flags.sampling import sampling_defaults
from pyllama.server.flags.speculative import draft_options, ngram_options
from pyllama.server.http.listen import unsupported
from pyllama.server.settings import GcpSettings, NgramOptions, Settings

__all__ = ["main", "parse_args"]


def _warn(message: str) -> None:
    print(f"pyllama-server: warning: {message}", file=sys.stderr)


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
    parser, envs = build_parser()
    environ = dict(os.environ if environ is None else environ)
    # older spellings of variables llama.cpp has renamed
    for old, new in (("LLAMA_OFFLINE", "LLAMA_ARG_OFFLINE"), ("LLAMA_ARG_WEBUI", "LLAMA_ARG_UI")):
        if old in environ:
            environ.setdefault(new, environ[old])
    if "LLAMA_ARG_NO_PREFILL_ASSISTANT" in environ and "LLAMA_ARG_PREFILL_ASSISTANT" not in environ:
        try:
            off = env_bool(environ["LLAMA_ARG_NO_PREFILL_ASSISTANT"])
        except argparse.ArgumentTypeError as e:
            parser.error(f"environment variable LLAMA_ARG_NO_PREFILL_ASSISTANT: {e}")
        environ["LLAMA_ARG_PREFILL_ASSISTANT"] = "0" if off else "1"
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
        try:
            text = read_text(a.api_key_file, "--api-key-file")
        except ValueError as e:
            parser.error(str(e))
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                keys.append(line)
    template = a.chat_template
    if a.chat_template_file:
        try:
            template = read_text(a.chat_template_file, "--chat-template-file")
        except ValueError as e:
            parser.error(str(e))
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
    if a.timeout_s <= 0:
        parser.error("-to/--timeout must be > 0 seconds")
    if a.n_keep < -1:
        parser.error("--keep must be >= -1")
    if a.cache_ram < -1:
        parser.error("--cache-ram must be >= -1")
    if a.prefix_share_min < 1:
        parser.error("--prefix-share-min must be >= 1")
    if a.embd_step_tokens < -1:
        parser.error("--embd-step-tokens must be >= -1")
    if a.cache_reuse < 0:
        parser.error("--cache-reuse must be >= 0")
    if a.n_parallel == 0 or a.n_parallel < -1:
        parser.error("--parallel must be >= 1 (or -1 for auto)")
    if a.sleep_idle_seconds == 0 or a.sleep_idle_seconds < -1:
        parser.error("--sleep-idle-seconds: cannot be 0 or less than -1")
    mode = choose_mode(a)
    router = mode.router
    if mode.preset is not None:  # -hf named a repository of presets: they are the models
        a.models_preset, a.hf_repo, a.hf_file = mode.preset, None, None
    if a.models_dir and not is_dir(a.models_dir):
        parser.error(f"--models-dir '{a.models_dir}' does not exist or is not a directory")
    if a.models_preset and not is_file(a.models_preset):
        parser.error(f"--models-preset '{a.models_preset}' does not exist")
    if not _split(a.host):
        parser.error("--host requires at least one address")
    if why := unsupported(_split(a.host), bool(a.reuse_port)):
        parser.error(why)  # a UNIX socket or --reuse-port where the platform has none
    try:
        gcp = GcpSettings.from_env(environ)
    except ValueError:
        parser.error(f"AIP_HTTP_PORT must be a port number, got {environ.get('AIP_HTTP_PORT')!r}")
    spec_types, synth, ngram = _speculative(parser, a)
    mmproj = _multimodal(parser, a)
    try:
        sampling = sampling_defaults(a)
        load, context = model_options(a, _warn)
        draft = draft_options(a)
        logs = log_options(a)
        http = http_options(a)
        http.update(hub_options(a))
        context = dataclasses.replace(context, **cpu_placements(a))
    except ValueError as e:
        parser.error(str(e))
    _refuse_polling(parser, a)
    kwargs = {**http.pop("template_kwarg_defaults"), **kwargs}  # type: ignore[dict-item]
    if http.pop("escape") and "dry_sequence_breakers" in sampling:
        sampling["dry_sequence_breakers"] = [unescape(b) for b in sampling["dry_sequence_breakers"]]
    load.draft_tensor_overrides = draft.pop("draft_tensor_overrides")  # type: ignore[assignment]
    context = dataclasses.replace(context, **draft)  # type: ignore[arg-type]
    mm_on = mmproj is not None or (bool(a.mmproj_url) and a.mmproj_auto is not False)
    if a.rpc and not router:  # a router's children add them, each for its own model
        add_rpc_servers(parser, a.rpc)
    devices, tensor_split = _offload(parser, a)
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
        n_gpu_layers=str(a.n_gpu_layers or "auto"),
        load=load,
        context=context,
        devices=devices,
        split_mode=a.split_mode or "layer",
        main_gpu=a.main_gpu or 0,
        tensor_split=tensor_split,
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
        context_shift=bool(a.context_shift) and not mm_on,
        spm_infill=a.spm_infill,
        prefill_assistant=a.prefill_assistant is not False,
        n_keep=a.n_keep,
        cache_reuse=0 if mm_on else a.cache_reuse,
        cache_ram_mib=a.cache_ram,
        cache_idle_slots=a.cache_idle_slots is not False,
        prefix_share=a.prefix_share is not False,
        prefix_share_min=a.prefix_share_min,
        embd_step_tokens=a.embd_step_tokens,
        cont_batching=a.cont_batching is not False,
        backend_sampling=bool(a.backend_sampling),
        host_greedy=bool(a.host_greedy),
        draft_backend_sampling=a.draft_backend_sampling is not False,
        slot_prompt_similarity=a.slot_prompt_similarity,
        model_draft=a.model_draft,
        sampling=sampling,
        mmproj=mmproj,
        mmproj_url=None if a.mmproj_auto is False else a.mmproj_url,
        mmproj_auto=a.mmproj_auto is not False,
        mmproj_offload=a.mmproj_offload is not False,
        mmproj_device=a.mmproj_device,
        image_min_tokens=a.image_min_tokens,
        image_max_tokens=a.image_max_tokens,
        mtmd_batch_max_tokens=a.mtmd_batch_max_tokens,
        media_path=a.media_path,
        media_allow_private=bool(a.media_allow_private),
        metrics_public=bool(a.metrics_public),
        spec_draft_n_max=a.spec_draft_n_max,
        spec_draft_n_min=a.spec_draft_n_min,
        spec_draft_p_min=a.spec_draft_p_min,
        spec_types=spec_types,
        ngram=ngram,
        spec_synth_probs=synth,
        max_queue=a.max_queue,
        max_body_bytes=a.max_body_bytes,
        batch=batch_options(a, parser),
        cors_origins=_split(a.cors_origins) or (["localhost"] if agent_tools else []),
        cors_methods=a.cors_methods,
        cors_headers=a.cors_headers,
        cors_credentials=a.cors_credentials is not False,
        webui=a.webui is not False,
        tools=tools,
        tools_runtime=a.tools_runtime,
        mcp_servers_config=a.mcp_servers_config,
        mcp_servers_json=a.mcp_servers_json,
        ui_mcp_proxy=bool(a.ui_mcp_proxy or a.agent),
        gcp=gcp,
        verbose=bool(a.verbose),
        logs=logs,
        **http,  # type: ignore[arg-type]
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


def _refuse_polling(parser: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """ggml reads the polling level only in its own thread pool; a CPU backend built with
    OpenMP (pyllama's and llama-server's builds) runs its threads in OpenMP's instead, so any
    level but the default would be parsed and then ignored: refused, naming the option."""
    polls = polls_set(a)
    if not polls:
        return
    from pyllama import hardware  # loads the backends: only when a level is given

    if hardware.cpu_uses_openmp():
        option, value = polls[0]
        parser.error(
            f"{option} {value}: the CPU backend runs its threads with OpenMP, which never "
            f"reads ggml's polling level (only the default, {DEFAULT_POLL}, is taken)"
        )


_OFFLOAD_FLAGS = {
    "n_gpu_layers": "--gpu-layers",
    "split_mode": "--split-mode",
    "tensor_split": "--tensor-split",
    "main_gpu": "--main-gpu",
}


def _offload(parser: argparse.ArgumentParser, a: argparse.Namespace) -> tuple[list, list]:
    """--device and --tensor-split checked as llama-server checks them; the offload flags
    warn, as llama-server's do, when no GPU backend is loaded to honour them."""
    ngl = a.n_gpu_layers
    if ngl is not None and ngl not in ("auto", "all"):
        try:
            int(ngl)
        except ValueError:
            parser.error(f"--gpu-layers must be a number, 'auto' or 'all', got '{ngl}'")
    try:
        split = (
            [float(v) for v in a.tensor_split.replace("/", ",").split(",") if v.strip()]
            if a.tensor_split
            else []
        )
    except ValueError:
        parser.error(f"--tensor-split must be numbers separated by commas, got '{a.tensor_split}'")
    devices = _split(a.device)
    if a.device is not None and not devices:
        parser.error("--device: no devices specified")
    given = [flag for dest, flag in _OFFLOAD_FLAGS.items() if getattr(a, dest) is not None]
    if devices == ["none"] or not (devices or given):
        return devices, split  # nothing that needs the compiled module
    from pyllama import hardware  # loads the backends: only when an offload flag is given

    gpus = {d.name for d in hardware.devices() if d.type != "cpu"}
    for name in devices:
        if name not in gpus:
            known = ", ".join(sorted(gpus)) or "none; see pyllama-server --list-devices"
            parser.error(f"invalid device: {name} (available: {known})")
    if not gpus and given:
        _warn(
            f"no GPU device is loaded, so {', '.join(given)} "
            "has no effect (pyllama-server --list-devices shows the devices)"
        )
    return devices, split


def _multimodal(parser: argparse.ArgumentParser, a: argparse.Namespace) -> str | None:
    """--mmproj and --media-path checked as llama-server checks them; the projector path
    (None: none, or one that --mmproj-url downloads when the model loads). A projector
    turns context shift and cache reuse off, with llama-server's warnings."""
    if a.media_path is not None and not is_dir(a.media_path):
        parser.error(f"--media-path: not a directory: {a.media_path}")
    if a.mtmd_batch_max_tokens < 1:
        parser.error("--mtmd-batch-max-tokens must be >= 1")
    if a.mmproj_auto is False:  # --no-mmproj: no projector at all
        return None
    if a.mmproj is not None and not a.mmproj_url and not is_file(a.mmproj):
        parser.error(f"--mmproj: '{a.mmproj}' does not exist or is not a file")
    if a.mmproj or a.mmproj_url:
        for on, what in ((a.context_shift, "ctx_shift"), (a.cache_reuse, "cache_reuse")):
            if on:
                _warn(f"{what} is not supported by multimodal, it will be disabled")
        if a.model_draft is not None:
            parser.error("--mmproj cannot be used with a draft model (--model-draft) yet")
    return a.mmproj


def _speculative(
    parser: argparse.ArgumentParser, a: argparse.Namespace
) -> tuple[list[str], list[float], NgramOptions]:
    """--spec-type, the n-gram drafters' options and synthetic acceptance, checked as
    llama-server checks them."""
    has_draft = (a.model_draft or a.draft_hf_repo) is not None
    try:
        types = spec.parse_types(a.spec_type) if a.spec_type else []
    except ValueError as e:
        parser.error(f"--spec-type: {e}")
    try:
        ngram = ngram_options(a)
        n_max = spec.n_max(types, a.spec_draft_n_max, ngram.longest_drafts())
    except ValueError as e:
        parser.error(f"speculative decoding: {e}")
    rates = None
    try:
        if a.spec_synth_rates is not None:
            rates = [float(v) for v in a.spec_synth_rates.split(",")]
        synth = spec.synth_rates(n_max, a.spec_synth_len, rates)
    except ValueError as e:
        parser.error(f"--spec-synth-len/--spec-synth-rates: {e}")
    why = spec.refuse_heads(types, has_draft)
    if why:
        parser.error(f"--spec-type {why}")
    if "draft-simple" in types and not has_draft:
        parser.error("--spec-type draft-simple needs a draft model (--model-draft)")
    return types, spec.conditional_probs(synth), ngram


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)  # this module imports only the standard library: --help works
    try:
        require("server", "pyllama-server")
    except MissingExtraError as e:
        print(f"pyllama-server: {e}", file=sys.stderr)
        return 1
    from pyllama.server.app import serve

    return serve(settings)
