"""The Ray Serve application: arguments, deployments, and the builder ``serve run`` calls.

    serve run pyllama.serve.rayserve:build_app model=/models/smollm2.gguf replicas=2 \\
        server_args="-c 8192 -np 4"

or from Python: ``serve.run(build_app({"model": path, "replicas": 2}))``. ``server_args`` are
pyllama-server's (llama-server's) flags, checked here before anything is deployed. The URL
prefix is Serve's own (``serve run --route-prefix /llm``, ``serve.run(app, route_prefix=...)``).

Each ``serve.run`` / ``serve run`` gives the application a new code version (Ray 2.60 took
``version`` away from deployments), so Serve replaces every replica of both deployments,
the ingress included, draining the old ones: the ingress drains as long as the replicas
(``drain_limit_s``), since every stream crosses it.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from ray import serve
from ray.serve import Application
from ray.serve.config import RequestRouterConfig

from pyllama.serve import cachesize
from pyllama.serve.prefix import BLOCK_BYTES
from pyllama.serve.rayserve.flags import parse_server_args
from pyllama.serve.rayserve.ingress import PyllamaIngress
from pyllama.serve.rayserve.replica import PyllamaReplica

__all__ = ["ServeArgs", "build_app"]

ROUTER = "pyllama.serve.rayserve.router:PrefixAffinityRouter"
_THREADS = re.compile(r"^(-t|--threads)$|^-t\d|^--threads=")  # -t N, -t8, --threads=8
AUTO_PARALLEL = 4  # what -np -1 (auto, the default) gives, as in llama-server
UNKNOWN_CTX = 32768  # -c 0 (the model's own context), which is known only once it loads
DRAIN_SLACK_S = 60.0  # a drain's allowance past generation: the prompt, a slow first token


class ServeArgs(BaseModel):
    """``serve run`` passes every value as a string; they are converted and checked here."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="GGUF path on every node (as -m)")
    hf: str | None = Field(None, description="hub repo[:quant], as -hf")
    server_args: list[str] = Field(default_factory=list, description="more pyllama-server flags")
    replicas: int = Field(1, ge=1, description="fixed replica count (no autoscaling)")
    min_replicas: int | None = Field(None, ge=0, description="autoscale from this many")
    max_replicas: int | None = Field(None, ge=1, description="autoscale up to this many")
    target_ongoing_requests: float | None = Field(
        None, gt=0, description="autoscaling target per replica (default: its slots, -np)"
    )
    upscale_delay_s: float = Field(30.0, ge=0, description="autoscaling: load seen this long")
    downscale_delay_s: float = Field(600.0, ge=0, description="autoscaling: idle this long")
    router: Literal["prefix", "default"] = "prefix"
    decode_bytes: int = Field(
        1024, ge=0, description="prefix router: an answer's cost in bytes of prompt evaluated"
    )
    balance: float = Field(
        0.25,
        ge=0,
        description="prefix router: a replica this share busier than the best is as good",
    )
    capacity_blocks: int | None = Field(
        None, ge=1, description="prefix index blocks per replica (default: from -c, --cache-ram)"
    )
    routing_stats_period_s: float = Field(
        1.0, gt=0, description="how often replicas report their blocks and load to the routers"
    )
    block_bytes: int = Field(BLOCK_BYTES, ge=16)
    ingress_replicas: int = Field(
        2, ge=1, description="HTTP ingress replicas (two: no single point of failure)"
    )
    num_cpus: float = Field(1.0, ge=0, description="CPUs per replica (also -t if none given)")
    num_gpus: float = Field(0.0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict, description="custom Ray resources")
    max_replicas_per_node: int | None = Field(None, ge=1)
    max_ongoing_requests: int | None = Field(
        None, ge=1, description="per replica (default: 4 x its slots)"
    )
    max_queued_requests: int | None = Field(
        None,
        ge=-1,
        description="waiting for a replica, per ingress (default: 8 x slots; -1: no bound)",
    )
    graceful_shutdown_timeout_s: float | None = Field(
        None, ge=0, description="drain limit (default: the longest answer at drain_tokens_per_s)"
    )
    drain_tokens_per_s: float = Field(
        2.0, gt=0, description="the slowest generation a draining replica is allowed"
    )
    health_check_period_s: float = Field(5.0, gt=0)
    name: str = "pyllama"

    @field_validator("server_args", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return shlex.split(v) if isinstance(v, str) else v

    @field_validator("resources", mode="before")
    @classmethod
    def _json(cls, v: Any) -> Any:
        return json.loads(v) if isinstance(v, str) else v

    def argv(self) -> list[str]:
        """The replica's pyllama-server command line (``--metrics`` always: gateways read it)."""
        argv = []
        if self.model:
            argv += ["--model", self.model]
        if self.hf:
            argv += ["-hf", self.hf]
        argv += self.server_args
        if not any(_THREADS.match(a) for a in argv) and self.num_cpus >= 1:
            argv += ["--threads", str(int(self.num_cpus))]  # not every core of the node
        if "--metrics" not in argv:
            argv.append("--metrics")
        return argv


def drain_limit_s(args: ServeArgs, settings: Any) -> float:
    """How long a replica being removed may take to finish (``graceful_shutdown_timeout_s``):
    the longest answer its flags allow (``-n``, else the whole context ``-c``: with a unified
    KV cache one answer may take it all) at ``drain_tokens_per_s``, plus ``DRAIN_SLACK_S``.
    Serve waits only while requests run: the limit costs nothing when they end sooner."""
    if args.graceful_shutdown_timeout_s is not None:
        return args.graceful_shutdown_timeout_s
    ctx = settings.n_ctx if settings.n_ctx > 0 else UNKNOWN_CTX
    tokens = min(settings.n_predict, ctx) if settings.n_predict > 0 else ctx
    return round(tokens / args.drain_tokens_per_s + DRAIN_SLACK_S, 1)


def _deployment_options(
    args: ServeArgs, n_parallel: int, drain_s: float | None = None, ctx_tokens: int = 0
) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "ray_actor_options": {
            "num_cpus": args.num_cpus,
            "num_gpus": args.num_gpus,
            "resources": dict(args.resources),
        },
        # pyllama queues past its slots itself (deferred): a replica holding a prefix may
        # take a deeper queue before Serve's router looks elsewhere
        "max_ongoing_requests": args.max_ongoing_requests or 4 * n_parallel,
        # past this many waiting for a replica, an ingress answers 503 at once
        "max_queued_requests": (
            args.max_queued_requests if args.max_queued_requests is not None else 8 * n_parallel
        ),
        "graceful_shutdown_timeout_s": drain_s if drain_s is not None else DRAIN_SLACK_S,
        "graceful_shutdown_wait_loop_s": 1.0,
        "health_check_period_s": args.health_check_period_s,
        "health_check_timeout_s": 30.0,
    }
    if args.max_replicas_per_node is not None:
        opts["max_replicas_per_node"] = args.max_replicas_per_node
    if args.max_replicas is not None:
        opts["autoscaling_config"] = {
            "min_replicas": args.min_replicas if args.min_replicas is not None else 1,
            "max_replicas": args.max_replicas,
            "target_ongoing_requests": args.target_ongoing_requests or n_parallel,
            "upscale_delay_s": args.upscale_delay_s,
            "downscale_delay_s": args.downscale_delay_s,
        }
    else:
        opts["num_replicas"] = args.replicas
    # the default router too is pyllama's class (policy pow2): broadcasts must pin a replica
    opts["request_router_config"] = RequestRouterConfig(
        request_router_class=ROUTER,
        request_router_kwargs={
            "decode_bytes": args.decode_bytes,
            "block_bytes": args.block_bytes,
            # until each replica reports its own: what -c holds
            "capacity_blocks": args.capacity_blocks
            or cachesize.capacity_blocks(ctx_tokens or UNKNOWN_CTX, 0, None, args.block_bytes),
            "policy": "prefix" if args.router == "prefix" else "pow2",
            "balance": args.balance,
        },
        request_routing_stats_period_s=args.routing_stats_period_s,
    )
    return opts


def build_app(args: dict[str, Any] | ServeArgs) -> Application:
    """The application ``serve run pyllama.serve.rayserve:build_app key=value...`` deploys."""
    args = args if isinstance(args, ServeArgs) else ServeArgs.model_validate(args)
    if not args.model and not args.hf:
        raise ValueError("give model=PATH (the GGUF on every node) or hf=REPO[:QUANT]")
    argv = args.argv()
    settings = parse_server_args(argv)
    n_parallel = settings.n_parallel if settings.n_parallel > 0 else AUTO_PARALLEL
    drain_s = drain_limit_s(args, settings)
    opts = _deployment_options(args, n_parallel, drain_s, settings.n_ctx)
    replica_init = (argv, args.block_bytes, args.decode_bytes, args.capacity_blocks)
    replica = serve.deployment(PyllamaReplica, name=f"{args.name}-replica").options(**opts)
    ingress_init = (args.block_bytes, settings.max_body_bytes)
    ingress = serve.deployment(PyllamaIngress, name=args.name).options(
        num_replicas=args.ingress_replicas,
        max_ongoing_requests=10_000,  # it only waits on replicas; they bound the work
        ray_actor_options={"num_cpus": 0},
        # every stream crosses an ingress: it drains as long as the replicas do
        graceful_shutdown_timeout_s=drain_s,
        graceful_shutdown_wait_loop_s=1.0,
    )
    return ingress.bind(replica.bind(*replica_init), *ingress_init)
