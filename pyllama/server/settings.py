"""Server settings: one typed record, filled by the CLI (flags and LLAMA_ARG_* variables)
or by code embedding the server (``create_app(settings=Settings(model=...))``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyllama.server.logs import LogOptions

__all__ = [
    "ContextOptions",
    "CpuPlacement",
    "GcpSettings",
    "LoadOptions",
    "LogOptions",
    "NgramOptions",
    "Settings",
]


@dataclass(frozen=True)
class GcpSettings:
    """Vertex AI's prediction mode, from the AIP_* variables (its routes: ``gcp.py``)."""

    predict_route: str = "/predict"
    health_route: str = ""
    port: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GcpSettings | None:
        """None unless ``AIP_MODE`` is ``PREDICTION``."""
        if environ.get("AIP_MODE") != "PREDICTION":
            return None

        def route(name: str, default: str) -> str:
            value = environ.get(name) or default
            return value if not value or value.startswith("/") else "/" + value

        port = environ.get("AIP_HTTP_PORT")
        return cls(
            route("AIP_PREDICT_ROUTE", "/predict"),
            route("AIP_HEALTH_ROUTE", ""),
            int(port) if port else None,
        )


@dataclass(frozen=True)
class CpuPlacement:
    """ggml's compute threads: --cpu-mask, --cpu-range, --cpu-strict, --prio, --poll."""

    mask: str = ""
    range: str = ""
    strict: int = 0
    priority: int = 0
    poll: int = 50


@dataclass(frozen=True)
class NgramOptions:
    """The n-gram drafters' sizes (--spec-ngram-*) and ngram-cache's files (-lcs, -lcd);
    each map is (n-gram looked up, m-gram drafted, hits needed)."""

    mod_n_match: int = 24
    mod_n_min: int = 48
    mod_n_max: int = 64
    simple: tuple[int, int, int] = (12, 48, 1)
    map_k: tuple[int, int, int] = (12, 48, 1)
    map_k4v: tuple[int, int, int] = (12, 48, 1)
    lookup_cache_static: str = ""
    lookup_cache_dynamic: str = ""

    def longest_drafts(self) -> dict[str, int]:
        """Each kind's longest draft (ngram-cache drafts 8 at most, as in llama.cpp)."""
        return {
            "ngram-simple": self.simple[1],
            "ngram-map-k": self.map_k[1],
            "ngram-map-k4v": self.map_k4v[1],
            "ngram-mod": self.mod_n_max,
            "ngram-cache": 8,
        }


@dataclass
class LoadOptions:
    """How a model file is loaded (llama-server's common params)."""

    kv_overrides: list[str] = field(default_factory=list)  # --override-kv KEY=TYPE:VALUE
    tensor_overrides: list[tuple[str, str]] = field(default_factory=list)  # -ot, --cpu-moe
    draft_tensor_overrides: list[tuple[str, str]] = field(default_factory=list)  # -otd ...
    repack: bool = True
    no_host: bool = False
    load_mode: str = "auto"
    lazy_mode: str = "auto"
    check_tensors: bool = False
    numa: str | None = None  # distribute | isolate | numactl
    fit: bool = True  # --fit: lower -ngl and -c to fit device memory when they are not given
    fit_target_mib: list[int] = field(default_factory=lambda: [1024])
    fit_ctx: int = 4096


@dataclass
class ContextOptions:
    """The llama_context's own settings beyond the basics (RoPE, offload, CPU placement,
    control vectors, warm-up) and the draft model's context."""

    rope_scaling: str | None = None  # none | linear | yarn; None: the model's
    rope_freq_base: float = 0.0
    rope_freq_scale: float = 0.0
    yarn_ext_factor: float = -1.0
    yarn_attn_factor: float = -1.0
    yarn_beta_fast: float = -1.0
    yarn_beta_slow: float = -1.0
    yarn_orig_ctx: int = 0
    kv_offload: bool = True
    op_offload: bool = True
    cpu: CpuPlacement = field(default_factory=CpuPlacement)
    cpu_batch: CpuPlacement | None = None  # None: as cpu
    control_vectors: list[tuple[str, float]] = field(default_factory=list)
    control_vector_layers: tuple[int, int] = (0, 0)  # 0: first / last layer
    warmup: bool = True
    perf: bool = False  # llama.cpp's internal timings (--perf)
    # -ctxcp / -cms: checkpoints of recurrent/hybrid state (engine/checkpoints.cpp)
    ctx_checkpoints: int = 32
    swa_full: bool = False  # --swa-full: a full-size cache for sliding-window layers
    checkpoint_min_step: int = 8192
    draft_threads: int = -1
    draft_threads_batch: int = -1
    draft_cpu: CpuPlacement | None = None
    draft_cpu_batch: CpuPlacement | None = None
    draft_cache_type_k: str = ""
    draft_cache_type_v: str = ""
    draft_devices: list[str] = field(default_factory=list)  # [] as --device
    draft_gpu_layers: str = "auto"


DAY = 24 * 3600


@dataclass(frozen=True)
class BatchOptions:
    """OpenAI's Files and Batch API (``--batch*``, pyllama/server/batch)."""

    enabled: bool = True
    dir: str | None = None  # None: <pyllama's cache>/batches
    max_file_bytes: int = 200 << 20  # OpenAI's limits
    max_lines: int = 50_000
    parallel: int = 0  # lines in flight; 0: half the server's slots (at least 1)
    window_seconds: int = DAY  # a batch's completion window ("24h"), shortened by the flag
    priority: int = 100  # a line's admission priority (interactive requests: 0, lower first)

    def directory(self, port: int) -> Path:
        """``--batch-dir``, else one of pyllama's cache a port: a server restarted on its
        port resumes its batches, and two servers (two models) never run each other's."""
        if self.dir is not None:
            return Path(self.dir)
        from pyllama.models import cache_dir

        return cache_dir() / "batches" / str(port)


@dataclass
class Settings:
    model: str | None = None  # None: -hf, -mu or the demo model, fetched unless offline
    hf_repo: str | None = None  # -hf org/repo[:quant], from the hub cache
    hf_file: str | None = None
    hf_token: str | None = None
    model_url: str | None = None
    docker_repo: str | None = None  # -dr [<repo>/]<model>[:quant], from Docker Hub
    draft_hf_repo: str | None = None
    draft_hf_file: str | None = None
    alias: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # informational, listed by /models
    offline: bool = False
    host: str = "127.0.0.1"
    port: int = 8080
    n_ctx: int = 0  # 0: the model's training context
    n_parallel: int = -1  # -1: auto (4 slots sharing one unified KV cache, as llama-server)
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int = -1
    n_threads_batch: int = -1
    n_gpu_layers: str = "auto"
    load: LoadOptions = field(default_factory=LoadOptions)
    context: ContextOptions = field(default_factory=ContextOptions)
    devices: list[str] = field(default_factory=list)  # [] every GPU; ["none"] no offload
    split_mode: str = "layer"
    main_gpu: int = 0
    tensor_split: list[float] = field(default_factory=list)
    n_predict: int = -1
    temperature: float = 0.8
    seed: int = -1
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"
    kv_unified: bool | None = None  # None: unified when n_parallel is auto
    embeddings: bool = False
    reranking: bool = False
    pooling: str | None = None
    metrics: bool = False
    metrics_public: bool = False  # /metrics without the API key (pyllama's)
    slots: bool = True
    props: bool = False
    slot_save_path: str | None = None
    api_keys: list[str] = field(default_factory=list)
    ssl_key_file: str | None = None
    ssl_cert_file: str | None = None
    chat_template: str | None = None  # template text (from --chat-template or its file)
    jinja: bool = True
    reasoning_format: str = "auto"
    reasoning: str = "auto"  # on | off | auto
    reasoning_budget: int = -1  # tokens a thinking block may take (-1: no limit)
    reasoning_budget_message: str = ""  # written before the forced end tag
    chat_template_kwargs: dict[str, object] = field(default_factory=dict)
    lora: list[tuple[str, float]] = field(default_factory=list)
    lora_init_without_apply: bool = False
    context_shift: bool = False
    spm_infill: bool = False
    prefill_assistant: bool = True  # a final assistant message is continued, not closed
    n_keep: int = 0
    cache_reuse: int = 0
    slot_prompt_similarity: float = 0.1
    model_draft: str | None = None
    # --top-k ... --json-schema: request fields every request starts from (its own win)
    sampling: dict[str, object] = field(default_factory=dict)
    # multimodal (--mmproj ...): a projector file for images and audio
    mmproj: str | None = None
    mmproj_url: str | None = None  # downloaded into the cache when the model loads
    mmproj_auto: bool = True  # -hf: load the projector the repository has beside the model
    mmproj_offload: bool = True
    mmproj_device: str | None = None  # None: follows --device; "none": the CPU
    image_min_tokens: int = -1
    image_max_tokens: int = -1
    mtmd_batch_max_tokens: int = 1024
    media_path: str | None = None  # directory for file:// media URLs; None: refused
    media_allow_private: bool = False  # http(s) media URLs to private addresses (pyllama's)
    video_fps: float = 4.0  # --video-fps: frames a second read from a video (<= 0: its own)
    video_timestamp_interval_ms: int = 5000  # --video-timestamp-interval (<= 0: no timestamps)
    video_ffmpeg_dir: str | None = None  # --video-ffmpeg-dir: ffmpeg and ffprobe; None: PATH
    spec_draft_n_max: int = 3
    spec_draft_n_min: int = 0
    spec_draft_p_min: float = 0.0
    cache_ram_mib: int = 8192  # --cache-ram (llama-server's default)
    cache_idle_slots: bool = True
    prefix_share: bool = True  # --prefix-share (pyllama's): shared prompt prefixes copied
    prefix_share_min: int = 32
    embd_step_tokens: int = -1  # --embd-step-tokens (pyllama's); -1: n_embd/2 for an encoder
    cont_batching: bool = True  # -nocb: prompts wait for a step where nothing generates
    backend_sampling: bool = False  # -bs: every request's default backend_sampling
    host_greedy: bool = False  # --host-greedy: greedy picks on the host even on the CPU (pyllama's)
    draft_backend_sampling: bool = True  # --[no-]spec-draft-backend-sampling (llama-server: on)
    spec_types: list[str] = field(default_factory=list)  # --spec-type; empty: none
    ngram: NgramOptions = field(default_factory=NgramOptions)  # for --spec-type ngram-*
    spec_synth_probs: list[float] = field(default_factory=list)  # conditional; empty: off
    max_queue: int = 256  # requests waiting for a slot before 503
    max_body_bytes: int = 64 << 20  # larger request bodies get 413
    batch: BatchOptions = field(default_factory=BatchOptions)  # /v1/files, /v1/batches
    cors_origins: list[str] = field(default_factory=list)  # CORS off unless asked
    cors_methods: str = "GET, POST, DELETE, OPTIONS"
    cors_headers: str = "*"
    cors_credentials: bool = True  # for listed origins only; never with "*"
    sleep_idle_seconds: float = -1  # < 0: never sleep
    # router mode (server/router.py): one child server per loaded model
    router: bool = False
    models_dir: str | None = None
    models_preset: str | None = None
    models_max: int = 4  # 0: no limit
    models_autoload: bool = True
    child_args: list[str] = field(default_factory=list)  # the router's flags children inherit
    webui: bool = True  # the chat page at / (server/webui.py); --no-webui turns it off
    # experimental agent tools (server/tools/): GET/POST /tools and the web UI's MCP proxy
    tools: list[str] = field(default_factory=list)  # built-in tool names, or "all"
    tools_runtime: str = ""  # isolate every tool call runs in (docker:<image>, ssh:<host> ...)
    mcp_servers_config: str | None = None  # a JSON file of MCP servers
    mcp_servers_json: str | None = None  # the same, inline
    ui_mcp_proxy: bool = False  # /cors-proxy
    gcp: GcpSettings | None = None  # Vertex AI's /predict (AIP_MODE=PREDICTION)
    # HTTP (--api-prefix ...) and request defaults (--no-cache-prompt, -r, -sp ...)
    api_prefix: str = ""  # every route under it ("" none)
    static_path: str | None = None  # --path: static files served at /
    reuse_port: bool = False
    ui_config: dict[str, object] | None = None  # /props ui_settings
    sse_ping_interval: int = 30  # seconds of stream silence before ":" (<= 0: never)
    threads_http: int = -1  # worker threads for blocking request work (-1: Python's)
    cache_prompt: bool = True
    stop_words: list[str] = field(default_factory=list)  # -r: stops of requests without any
    special: bool = False  # -sp: special tokens written in the output
    embd_normalize: int = 2
    kv_unified_per_slot: int | None = None
    skip_chat_parsing: bool = False  # reasoning and tool calls left in the content
    log_prompts_dir: str | None = None
    verbose: bool = False
    logs: LogOptions = field(default_factory=LogOptions)
    timeout_s: float = 3600.0

    @property
    def model_alias(self) -> str | None:
        return self.alias[0] if self.alias else None
