"""What a repaired plugin wheel holds and where its module's libraries come from
(ci/build_backend.sh appends this to its report), and a check of it.

    python ci/plugin_report.py WHEEL cuda|vulkan

For each pyllama_plugins/<name>/libggml-<name>.so in the wheel: its size, its RUNPATH
(readelf -d), each DT_NEEDED entry with where it comes from, and, for CUDA, the device code
per architecture (ci/fatbin.py). Exit 1 when the RUNPATH lacks the folders the plugin
layout relies on, when a library that must come from elsewhere was grafted into the wheel,
or when a needed library is neither inside the wheel, nor left out for a reason named
here, nor one the manylinux policy lets a wheel take from the system.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fatbin import table

CORE_LIB = "$ORIGIN/../../pyllama/lib"
RUNPATH = {
    "cuda": [CORE_LIB, "$ORIGIN/../../nvidia/cu13/lib"],
    "vulkan": [CORE_LIB],
}

# left out of the wheel on purpose (auditwheel repair --exclude), and why
LEFT_OUT = {
    r"libggml-base\.so": "the core wheel's pyllama/lib: one ggml registry for the core and "
    "its plugins, and the plugin must match the core's build",
    r"libcudart\.so\.\d+": "the nvidia-cuda-runtime wheel (nvidia/cu13/lib), a dependency",
    r"libcublas\.so\.\d+": "the nvidia-cublas wheel (nvidia/cu13/lib), a dependency",
    r"libcublasLt\.so\.\d+": "the nvidia-cublas wheel (nvidia/cu13/lib), a dependency",
    r"libcuda\.so\.1": "the NVIDIA driver: the host's, matching its kernel module",
    r"libvulkan\.so\.1": "the host's Vulkan loader, which finds the host's drivers",
}

# what manylinux_2_34 lets a wheel need from the system (auditwheel's policy, the part a
# ggml backend can need)
SYSTEM = {
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "librt.so.1",
    "libpthread.so.0",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


def dynamic(path: Path) -> tuple[list[str], list[str]]:
    """The module's DT_NEEDED entries and its RUNPATH (or RPATH) folders."""
    out = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True, check=True)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out.stdout)
    paths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[(.+?)\]", out.stdout)
    return needed, [p for line in paths for p in line.split(":")]


def left_out_reason(name: str) -> str | None:
    for pattern, reason in LEFT_OUT.items():
        if re.fullmatch(pattern, name):
            return reason
    return None


def report(wheel: Path, backend: str) -> tuple[list[str], list[str]]:
    """The report's lines and the problems found."""
    lines = [f"{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB"]
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(wheel) as z:
            z.extractall(root)
        inside = {p.name: p.relative_to(root) for p in root.rglob("*.so*")}
        for name, rel in sorted(inside.items()):
            if left_out_reason(name):
                problems.append(f"{rel} is inside the wheel; it must come from elsewhere")
        modules = sorted(root.glob(f"pyllama_plugins/{backend}/libggml-{backend}.so"))
        if not modules:
            problems.append(f"no pyllama_plugins/{backend}/libggml-{backend}.so in the wheel")
        for module in modules:
            rel = module.relative_to(root)
            needed, runpath = dynamic(module)
            lines.append(f"{rel}: {module.stat().st_size / 1e6:.1f} MB")
            lines.append(f"  RUNPATH {':'.join(runpath) or '(none)'}")
            for folder in RUNPATH[backend]:
                if folder not in runpath:
                    problems.append(f"{rel}: RUNPATH lacks {folder}")
            lines.append("  DT_NEEDED:")
            for name in needed:
                reason = left_out_reason(name)
                if reason:
                    where = f"left out: {reason}"
                elif name in inside:
                    where = f"inside the wheel: {inside[name]}"
                elif name in SYSTEM:
                    where = "the system (in the manylinux policy)"
                else:
                    where = "NOT FOUND: neither inside, left out, nor a system library"
                    problems.append(f"{rel} needs {name}: {where}")
                lines.append(f"    {name:<28}{where}")
            if backend == "cuda":
                lines += ["  " + line for line in table(module)]
    return lines, problems


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in RUNPATH:
        print("usage: python ci/plugin_report.py WHEEL cuda|vulkan", file=sys.stderr)
        return 2
    lines, problems = report(Path(argv[0]), argv[1])
    print("\n".join(lines))
    for p in problems:
        print(f"plugin_report: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
