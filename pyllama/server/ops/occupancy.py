"""What the slots and the tasks in flight hold at a scrape (KV share, LoRA adapters in
use), and the two info series built from the server's setup: ``lora_requests_info`` and
``cache_config_info`` (vLLM's names and labels, which the endpoint picker reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyllama.server.ops.latency import label_value

if TYPE_CHECKING:
    from pyllama.engine import AsyncEngine

__all__ = ["BLOCK_SIZE", "Load", "cache_lines", "load_of", "lora_lines"]

# cache_config_info's block: the endpoint picker's default prefix block (blockSizeTokens 16
# in GAIE v1.5.0's prefix plugin), so that reporting it leaves the picker's hashing as is
BLOCK_SIZE = 16


@dataclass(frozen=True)
class Load:
    """What the slots and the tasks in flight hold at a scrape."""

    busy_share: float = 0.0  # of the KV cells the slots hold, the part busy slots hold
    running: tuple[str, ...] = ()  # adapters used by tasks in a slot
    waiting: tuple[str, ...] = ()  # adapters used by tasks not in a slot yet


def load_of(engine: AsyncEngine, adapters: list[str]) -> Load:
    """The slots first, then the live tasks (whose ready events are taken first): a task
    that ends between the two is in neither list, one admitted between them is waiting."""
    slots = engine.engine.slots()
    live = engine.live()
    in_slot = {s["task_id"] for s in slots if s["state"] != "idle"}
    held = sum(s["n_cache"] for s in slots)
    busy = sum(s["n_cache"] for s in slots if s["state"] != "idle")
    running: set[int] = set()
    waiting: set[int] = set()
    for task in live:
        (running if task.task_id in in_slot else waiting).update(task.adapters)
    return Load(
        busy / held if held else 0.0,
        tuple(adapters[i] for i in sorted(running)),
        tuple(adapters[i] for i in sorted(waiting)),
    )


def lora_lines(adapters: list[str], load: Load, since: float, model: str) -> list[str]:
    name = "llamacpp:lora_requests_info"
    labels = (
        f"{model},"
        f'max_lora="{len(adapters)}",'
        f'waiting_lora_adapters="{label_value(",".join(load.waiting))}",'
        f'running_lora_adapters="{label_value(",".join(load.running))}"'
    )
    return [
        f"# HELP {name} Running stats on LoRA requests (vLLM: vllm:lora_requests_info): "
        "max_lora = adapters loaded; running_lora_adapters / waiting_lora_adapters = the "
        "adapters (file stems) used with a non-zero scale by requests in a slot / waiting "
        "for one; the value is the Unix time a scrape first saw these lists.",
        f"# TYPE {name} gauge",
        f"{name}{{{labels}}} {since}",
    ]


def cache_lines(n_ctx: int, model: str) -> list[str]:
    name = "llamacpp:cache_config_info"
    labels = f'{model},block_size="{BLOCK_SIZE}",num_gpu_blocks="{n_ctx // BLOCK_SIZE}"'
    return [
        f"# HELP {name} Size of the KV cache (vLLM: vllm:cache_config_info, value 1): "
        f"num_gpu_blocks = the KV cells of all slots (-c) / block_size. llama.cpp reuses "
        f"prompts token by token, not in blocks: block_size {BLOCK_SIZE} is the endpoint "
        "picker's default prefix block (tokens), so that its prefix index holds as many "
        "tokens a pod as the pod's KV cache.",
        f"# TYPE {name} gauge",
        f"{name}{{{labels}}} 1",
    ]
