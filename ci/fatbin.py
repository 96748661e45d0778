"""The device code an nvcc-built shared library carries, per architecture: its
``.nv_fatbin`` section read without the CUDA toolkit (ci/plugin_report.py uses it).

The section is a run of fat binaries, one per .cu file, each a 16-byte header (magic
0xBA55ED50, version, header size, size of the entries) and entries: a 64-byte header
(kind 1 = PTX, 2 = cubin; its own header size; the padded payload size, which advances the
walk; the architecture, 90 for sm_90) and the payload, compressed by nvcc's
``-compress-mode`` (ggml asks for ``size``). The layout is not documented by NVIDIA; the
walk checks itself (every container's entries must add up to its declared size) and
cuobjdump, where installed, lists the same entries. The ``a`` of an architecture-specific
target (sm_120a) is not read: it is shown as sm_120.

    python ci/fatbin.py LIBRARY    the table of ci/plugin_report.py for one library
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

MAGIC = 0xBA55ED50
KINDS = {1: "PTX", 2: "SASS"}


@dataclass
class Group:
    """Every entry of one kind for one architecture, summed over the library's objects."""

    kind: str  # "SASS" (a cubin: runs on that generation) or "PTX" (JIT-compiled)
    arch: int  # 90 for sm_90 / compute_90
    entries: int = 0
    stored: int = 0  # bytes in the section: entry headers and (compressed) payloads
    uncompressed: int = 0
    deflated: int = 0  # the stored payloads after zlib level 6, as a wheel stores them

    @property
    def name(self) -> str:
        return f"{'sm' if self.kind == 'SASS' else 'compute'}_{self.arch}"


def section(path: Path, name: str = ".nv_fatbin") -> bytes:
    """One section of a 64-bit little-endian ELF file (b"" when it has none)."""
    data = path.read_bytes()
    if data[:6] != b"\x7fELF\x02\x01":
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        (name_off,) = struct.unpack_from("<I", data, shoff + i * shentsize)
        offset, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 0x18)
        return name_off, offset, size

    _, str_off, _ = header(shstrndx)
    for i in range(shnum):
        name_off, offset, size = header(i)
        start = str_off + name_off
        if data[start : data.index(b"\0", start)].decode() == name:
            return data[offset : offset + size]
    return b""


def device_code(path: Path) -> list[Group]:
    """The library's SASS and PTX per architecture, largest first."""
    blob = section(path)
    groups: dict[tuple[str, int], Group] = {}
    payloads: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    pos = 0
    while (pos := blob.find(struct.pack("<I", MAGIC), pos)) >= 0:
        _, _, header_size, size = struct.unpack_from("<IHHQ", blob, pos)
        entry, end = pos + header_size, pos + header_size + size
        while entry < end:
            kind, _, entry_header, padded = struct.unpack_from("<HHIQ", blob, entry)
            (arch,) = struct.unpack_from("<I", blob, entry + 0x1C)
            (uncompressed,) = struct.unpack_from("<Q", blob, entry + 0x38)
            key = (KINDS.get(kind, f"kind {kind}"), arch)
            g = groups.setdefault(key, Group(*key))
            g.entries += 1
            g.stored += entry_header + padded
            g.uncompressed += uncompressed or padded  # 0 when stored raw
            payloads[key].append(blob[entry + entry_header : entry + entry_header + padded])
            entry += entry_header + padded
        if entry != end:
            raise ValueError(
                f"{path}: fat binary at {pos:#x}: entries end at {entry:#x}, not {end:#x}"
            )
        pos = end
    for key, parts in payloads.items():
        groups[key].deflated = len(zlib.compress(b"".join(parts), 6))
    return sorted(groups.values(), key=lambda g: -g.stored)


def table(path: Path) -> list[str]:
    """The device code of one library as report lines (MB = 10^6 bytes)."""
    groups = device_code(path)
    if not groups:
        return [f"{path.name}: no device code (.nv_fatbin)"]
    total = path.stat().st_size
    fat = len(section(path))
    lines = [
        f"{path.name}: {total / 1e6:.1f} MB, of which device code (.nv_fatbin) {fat / 1e6:.1f} MB",
        f"  {'target':<13}{'kind':<6}{'objects':>8}{'stored MB':>11}{'deflated MB':>13}"
        f"{'uncompressed MB':>17}",
    ]
    for g in groups:
        lines.append(
            f"  {g.name:<13}{g.kind:<6}{g.entries:>8}{g.stored / 1e6:>11.1f}"
            f"{g.deflated / 1e6:>13.1f}{g.uncompressed / 1e6:>17.1f}"
        )
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python ci/fatbin.py LIBRARY")
    print("\n".join(table(Path(sys.argv[1]))))
