"""The hardware pyllama runs on: the ggml backends loaded when it was imported, and their
devices.

Every backend is a module in ``pyllama/lib/``: the CPU in one or several variants
(``libggml-cpu-haswell.so`` ...: a release wheel has every one, a source build the portable
x86-64-v3 module alone, or with the build machine's own variant where it has more), and GPU
plugins when installed. At import the best CPU variant for this machine is loaded (never
an AMX one on its own; ``PYLLAMA_CPU_VARIANT=haswell`` picks one, ``PYLLAMA_AMX=1``
allows AMX), and each other backend's best module. ``summary()`` (the server's start-up
line) says which kernels run: the variant, its instruction sets, and what it was picked from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pyllama import _core

__all__ = [
    "Backend",
    "Device",
    "backends",
    "cpu_features",
    "cpu_modules",
    "cpu_uses_openmp",
    "cpu_variant",
    "devices",
    "summary",
]


@dataclass(frozen=True)
class Backend:
    name: str  # "CPU", "CUDA", "Vulkan" ...
    variant: str  # the CPU variant ("haswell"); "" for a module built for one target
    path: str
    score: int  # how well the module said it fits this machine


@dataclass(frozen=True)
class Device:
    name: str  # "CPU", "CUDA0" ... as --device takes it
    description: str
    type: str  # "cpu", "gpu", "igpu" or "accel"
    backend: str
    memory_free: int  # bytes
    memory_total: int


def backends() -> list[Backend]:
    """The backend modules loaded at import."""
    return [Backend(**b) for b in _core.backends()]


def devices() -> list[Device]:
    """Every device of the loaded backends, the CPU included."""
    return [Device(**d) for d in _core.devices()]


def cpu_variant() -> str:
    """The CPU variant in use ("" when the build has a single CPU module)."""
    return next((b.variant for b in backends() if b.name == "CPU"), "")


def cpu_modules() -> list[str]:
    """The CPU variants installed beside the one loaded, sorted ("" for a single module)."""
    cpu = next((b for b in backends() if b.name == "CPU"), None)
    if cpu is None:
        return []
    names = set()
    for f in Path(cpu.path).parent.iterdir():
        m = re.fullmatch(r"(?:lib)?ggml-cpu(?:-(.+?))?\.(?:so|dll|dylib)", f.name)
        if m:
            names.add(m.group(1) or "")
    return sorted(names)


_NOT_ISA = {"LLAMAFILE", "OPENMP", "REPACK", "KLEIDIAI", "ACCELERATE"}


def cpu_features() -> list[str]:
    """The instruction sets the loaded CPU kernels use ("AVX2", "AVX512"...), from ggml."""
    m = re.search(r"CPU : (.*?)(?:\b[A-Za-z]\w* : |$)", _core.system_info())
    if not m:
        return []
    return [
        f for f, on in re.findall(r"(\w+) = (\d+)", m.group(1)) if on == "1" and f not in _NOT_ISA
    ]


def cpu_uses_openmp() -> bool:
    """Whether the CPU backend runs its compute threads with OpenMP (ggml's "OPENMP"
    feature) rather than ggml's own thread pool."""
    return "OPENMP = 1" in _core.system_info()


def summary() -> str:
    """One line for logs: each device; for the CPU, the kernels in use and why those."""
    variant = cpu_variant()
    parts = []
    for d in devices():
        name = f"{d.name} ({d.description})"
        if d.type == "cpu":
            features = " ".join(cpu_features()) or "generic"
            modules = [m for m in cpu_modules() if m]
            if not variant:
                name += f", kernels: {features} (a single module)"
            elif len(modules) > 1:
                name += f", kernels {variant}: {features} (this CPU's best of {', '.join(modules)})"
            else:
                name += f", kernels {variant}: {features}"
        parts.append(name)
    return "; ".join(parts)


def main() -> None:
    """``python -m pyllama.hardware``: the devices, then each backend module loaded (with
    the CPU variant pyllama chose, its score and its file)."""
    print(summary())
    for b in backends():
        print(f"{b.name}: variant {b.variant or '(single module)'}, score {b.score}, {b.path}")


if __name__ == "__main__":
    main()
