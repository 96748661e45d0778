"""pyllama.serve.rayserve.app: ``serve run``'s string arguments made into ServeArgs, the
replica's pyllama-server command line, the deployment options, and the application built
without a Ray cluster (bad flags refused on the driver)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="the [ray] extra (Python >= 3.10)")

from pydantic import ValidationError  # noqa: E402
from ray.serve import Application  # noqa: E402

from pyllama.serve.rayserve.app import (  # noqa: E402
    ROUTER,
    ServeArgs,
    _deployment_options,
    build_app,
    drain_limit_s,
)
from pyllama.serve.rayserve.flags import parse_server_args  # noqa: E402
from pyllama.serve.rayserve.router import PrefixAffinityRouter  # noqa: E402

MODEL = "/models/model.gguf"  # never opened: nothing here loads a model


def _args(**kw: Any) -> ServeArgs:
    return ServeArgs.model_validate({"model": MODEL, **kw})


# ---------------------------------------------------------------- ServeArgs


def test_strings_from_serve_run_are_converted():
    args = _args(
        replicas="2",
        resources='{"slot": 1, "accel": 0.5}',
        server_args="-c 2048 -np 2",
        num_cpus="2",
        decode_bytes="3",
        max_replicas="4",
        min_replicas="0",
        upscale_delay_s="1.5",
        router="default",
    )
    assert args.replicas == 2
    assert args.resources == {"slot": 1.0, "accel": 0.5}
    assert args.server_args == ["-c", "2048", "-np", "2"]
    assert args.num_cpus == 2.0
    assert args.decode_bytes == 3
    assert (args.min_replicas, args.max_replicas) == (0, 4)
    assert args.upscale_delay_s == 1.5
    assert args.router == "default"


def test_server_args_are_split_as_a_shell_would():
    args = _args(server_args="--alias 'my model' -c 4096")
    assert args.server_args == ["--alias", "my model", "-c", "4096"]
    assert _args(server_args=["-c", "1 2"]).server_args == ["-c", "1 2"]  # a list as it is
    assert _args().server_args == [] and _args().resources == {}


def test_defaults():
    args = _args()
    assert args.replicas == 1 and args.router == "prefix" and args.max_replicas is None
    assert args.name == "pyllama" and args.ingress_replicas == 2
    assert args.graceful_shutdown_timeout_s is None and args.capacity_blocks is None


@pytest.mark.parametrize(
    "bad",
    [
        {"replica": "2"},  # unknown key (a typo of replicas)
        {"model_path": MODEL},
        {"replicas": "0"},
        {"replicas": "two"},
        {"router": "round-robin"},
        {"resources": "{not json"},
        {"resources": '["slot"]'},
        {"num_cpus": "-1"},
        {"max_replicas": "0"},
        {"block_bytes": "8"},
        {"route_prefix": "/llm"},  # Serve's own option (serve run --route-prefix), not ours
        {"ingress_replicas": "0"},
        {"max_queued_requests": "-2"},
        {"drain_tokens_per_s": "0"},
    ],
)
def test_bad_arguments_are_refused(bad: dict[str, str]):
    with pytest.raises(ValidationError):
        _args(**bad)


def test_unknown_key_is_named():
    with pytest.raises(ValidationError, match="replica_count"):
        _args(replica_count="2")


# ---------------------------------------------------------------- argv


def _count(argv: list[str], flag: str) -> int:
    return sum(a == flag for a in argv)


def test_argv_model_then_server_args():
    argv = _args(server_args="-c 2048 -np 2").argv()
    assert argv[:2] == ["--model", MODEL]
    assert argv[2:6] == ["-c", "2048", "-np", "2"]
    hf = ServeArgs(hf="org/repo:Q4_K_M").argv()
    assert hf[:2] == ["-hf", "org/repo:Q4_K_M"] and "--model" not in hf


def test_argv_adds_threads_from_num_cpus_only_without_t():
    argv = _args().argv()
    assert argv[argv.index("--threads") + 1] == "1"
    argv = _args(num_cpus="3").argv()
    assert argv[argv.index("--threads") + 1] == "3"
    argv = _args(num_cpus="2.7").argv()
    assert argv[argv.index("--threads") + 1] == "2"
    assert "--threads" not in _args(num_cpus="0.5").argv()  # less than a core: ggml's default
    for given in ("-t 6", "--threads 6"):
        argv = _args(server_args=given, num_cpus="2").argv()
        assert _count(argv, "--threads") + _count(argv, "-t") == 1, argv
        assert parse_server_args(argv).n_threads == 6


@pytest.mark.parametrize("given", ["--threads=6", "-t6"])
def test_argv_keeps_threads_given_in_one_token(given: str):
    assert parse_server_args(_args(server_args=given).argv()).n_threads == 6


def test_argv_has_metrics_once():
    assert _count(_args().argv(), "--metrics") == 1
    assert _count(_args(server_args="--metrics -c 512").argv(), "--metrics") == 1
    assert parse_server_args(_args().argv()).metrics is True


def test_argv_parses_as_pyllama_server_flags():
    settings = parse_server_args(_args(server_args="-c 2048 -np 2", num_cpus="2").argv())
    assert settings.model == MODEL
    assert (settings.n_ctx, settings.n_parallel, settings.n_threads) == (2048, 2, 2)


# ---------------------------------------------------------------- build_app


def _replica(app: Application) -> Any:
    """The model deployment the ingress was bound to (Ray keeps it on the Application)."""
    ingress = app._bound_deployment
    return ingress.init_args[0]._bound_deployment


def test_build_app_needs_no_cluster():
    # in a fresh interpreter: this session may have a cluster from tests/serve/test_ray_serve
    code = (
        "import ray; from pyllama.serve.rayserve import build_app; "
        f"build_app({{'model': {MODEL!r}, 'replicas': '3'}}); print(ray.is_initialized())"
    )
    out = subprocess.run(  # outside the source tree, which has no compiled module
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    assert out.stdout.split()[-1] == "False"
    app = build_app({"model": MODEL, "replicas": "3", "server_args": "-c 2048 -np 2"})
    assert isinstance(app, Application)
    ingress = app._bound_deployment
    assert ingress.name == "pyllama"
    assert ingress.num_replicas == 2
    replica_app, block_bytes, max_body = ingress.init_args
    assert isinstance(replica_app, Application)
    replica = replica_app._bound_deployment
    assert replica.name == "pyllama-replica"
    assert replica.num_replicas == 3
    assert replica.max_ongoing_requests == 8  # 4 x the slots
    assert (
        replica.init_args[0]
        == ServeArgs(model=MODEL, server_args=["-c", "2048", "-np", "2"]).argv()
    )
    assert replica.max_queued_requests == 16  # 8 x the slots, per ingress
    assert block_bytes == 256 and max_body > 0


def test_build_app_accepts_serve_args_and_a_name():
    app = build_app(_args(name="chat", block_bytes=128))
    assert app._bound_deployment.name == "chat"
    assert _replica(app).name == "chat-replica"
    assert app._bound_deployment.init_args[1] == 128


def test_build_app_counts_the_auto_slots():
    assert _replica(build_app({"model": MODEL})).max_ongoing_requests == 16  # 4 x the 4 auto slots


@pytest.mark.parametrize("args", [{}, {"model": ""}, {"server_args": "-c 512"}])
def test_build_app_refuses_no_model(args: dict[str, str]):
    with pytest.raises(ValueError, match="model="):
        build_app(args)


def test_build_app_refuses_router_mode(tmp_path):
    with pytest.raises(ValueError, match="one model"):
        build_app({"hf": "org/repo", "server_args": f"--models-dir {tmp_path}"})


@pytest.mark.parametrize(
    ("server_args", "flag"),
    [("--ctx-size abc", "--ctx-size"), ("--no-such-flag", "--no-such-flag"), ("-np 0", "-np")],
)
def test_build_app_refuses_bad_flags_naming_the_flag(server_args: str, flag: str):
    with pytest.raises(ValueError, match=flag):
        build_app({"model": MODEL, "server_args": server_args})


@pytest.mark.parametrize(
    ("server_args", "why"),
    [
        ("--ctx-size abc", "invalid int value: 'abc'"),
        ("--no-such-flag", "unrecognized arguments: --no-such-flag"),
    ],
)
def test_bad_flags_give_argparses_reason(server_args: str, why: str):
    with pytest.raises(ValueError, match=why):
        build_app({"model": MODEL, "server_args": server_args})


def test_build_app_refuses_inconsistent_autoscaling():
    with pytest.raises(ValueError):
        build_app({"model": MODEL, "min_replicas": "5", "max_replicas": "2"})


# ---------------------------------------------------------------- deployment options


def test_fixed_replicas_no_autoscaling():
    opts = _deployment_options(_args(replicas="3"), n_parallel=2)
    assert opts["num_replicas"] == 3
    assert "autoscaling_config" not in opts
    assert opts["max_ongoing_requests"] == 8
    assert "max_replicas_per_node" not in opts


def test_autoscaling_only_with_max_replicas():
    opts = _deployment_options(_args(replicas="3", max_replicas="5"), n_parallel=2)
    assert "num_replicas" not in opts
    assert opts["autoscaling_config"] == {
        "min_replicas": 1,
        "max_replicas": 5,
        "target_ongoing_requests": 2,  # the slots
        "upscale_delay_s": 30.0,
        "downscale_delay_s": 600.0,
    }
    opts = _deployment_options(
        _args(min_replicas="0", max_replicas="2", target_ongoing_requests="1.5"), n_parallel=4
    )
    assert opts["autoscaling_config"]["min_replicas"] == 0
    assert opts["autoscaling_config"]["target_ongoing_requests"] == 1.5
    # min_replicas alone does not turn autoscaling on
    assert "autoscaling_config" not in _deployment_options(_args(min_replicas="2"), 1)


def test_router_options():
    opts = _deployment_options(
        _args(decode_bytes="2", capacity_blocks="100", block_bytes="64"), n_parallel=1
    )
    config = opts["request_router_config"]
    assert config.request_router_class == ROUTER
    assert config.request_router_kwargs == {
        "decode_bytes": 2,
        "block_bytes": 64,
        "capacity_blocks": 100,
        "policy": "prefix",
        "balance": 0.25,
    }
    assert config.request_routing_stats_period_s == 1.0
    # Serve's policy in pyllama's class: broadcasts pin a replica through it
    default = _deployment_options(_args(router="default"), 1)["request_router_config"]
    assert default.request_router_class == ROUTER
    assert default.request_router_kwargs["policy"] == "pow2"


def test_index_size_follows_the_context():
    """Until a replica reports what its caches hold, the router's index holds what its
    context does (-c tokens at 4 bytes a token), not a fixed 16 MiB."""
    kw = lambda c: _deployment_options(_args(), 1, ctx_tokens=c)["request_router_config"]  # noqa: E731
    assert kw(8192).request_router_kwargs["capacity_blocks"] == 8192 * 4 // 256
    assert kw(65536).request_router_kwargs["capacity_blocks"] == 65536 * 4 // 256


def test_queue_bound():
    assert _deployment_options(_args(), n_parallel=2)["max_queued_requests"] == 16
    assert _deployment_options(_args(max_queued_requests="3"), 2)["max_queued_requests"] == 3
    assert _deployment_options(_args(max_queued_requests="-1"), 2)["max_queued_requests"] == -1


def _settings(flags: str) -> Any:
    return parse_server_args(["-m", MODEL, *flags.split()])


def test_drain_lasts_the_longest_answer():
    """A draining replica may finish the longest answer its flags allow (-n, else all of
    -c) at drain_tokens_per_s, plus a minute; an explicit limit wins."""
    assert drain_limit_s(_args(), _settings("-c 4096 -np 2")) == 4096 / 2.0 + 60
    assert drain_limit_s(_args(), _settings("-c 4096 -n 200")) == 200 / 2.0 + 60
    assert drain_limit_s(_args(drain_tokens_per_s="10"), _settings("-c 1000")) == 160
    assert drain_limit_s(_args(graceful_shutdown_timeout_s="7"), _settings("-c 4096")) == 7
    assert drain_limit_s(_args(), _settings("-c 0")) == 32768 / 2.0 + 60  # unknown: assumed


def test_ingress_drains_as_long_as_the_replicas():
    """Streams cross the ingress: Serve's 20 s default there cut them on scale changes."""
    app = build_app({"model": MODEL, "server_args": "-c 4096 -n 100"})
    ingress, replica = app._bound_deployment, _replica(app)
    assert replica._deployment_config.graceful_shutdown_timeout_s == 110
    assert ingress._deployment_config.graceful_shutdown_timeout_s == 110


def test_router_path_names_the_router_class():
    module, _, name = ROUTER.partition(":")
    assert getattr(importlib.import_module(module), name) is PrefixAffinityRouter


def test_actor_options():
    args = _args(num_cpus="4", num_gpus="1", resources='{"slot": 1}', max_replicas_per_node="1")
    opts = _deployment_options(args, n_parallel=3)
    assert opts["ray_actor_options"] == {
        "num_cpus": 4.0,
        "num_gpus": 1.0,
        "resources": {"slot": 1.0},
    }
    assert opts["max_replicas_per_node"] == 1
    assert opts["max_ongoing_requests"] == 12
    opts["ray_actor_options"]["resources"]["other"] = 1  # a copy: args are left as they were
    assert args.resources == {"slot": 1.0}
    assert _deployment_options(_args(max_ongoing_requests="9"), 3)["max_ongoing_requests"] == 9
