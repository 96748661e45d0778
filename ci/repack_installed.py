"""A wheel from an installed distribution: its RECORD's files, as the wheel installed them.

The GPU machine has no network and takes files 64 MiB a call, so the
nvidia-cublas wheel (hundreds of MB) cannot travel; the machine's image has it installed.
This writes those files back into a wheel (stored, not deflated: they are large and pip
only unpacks them) so that a fresh venv can ``pip install --no-index`` it like any other.
Nothing is rebuilt: the files are byte for byte the ones the original wheel held.

    python ci/repack_installed.py OUT_DIR NAME [NAME...]   (their installed requirements too)
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sys
import zipfile
from importlib import metadata
from pathlib import Path


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(name: str, out: Path) -> Path:
    dist = metadata.distribution(name)
    files = [f for f in dist.files or [] if not f.name.endswith(".pyc")]
    info = next(f for f in files if f.parent.name.endswith(".dist-info") and f.name == "WHEEL")
    info_dir = info.parent.as_posix()
    tag = next(
        line.split(":", 1)[1].strip()
        for line in dist.read_text("WHEEL").splitlines()
        if line.startswith("Tag:")
    )
    norm = dist.metadata["Name"].replace("-", "_")
    wheel = out / f"{norm}-{dist.version}-{tag}.whl"
    rows = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        for f in files:
            rel = f.as_posix()
            # installer-written entries are not part of the wheel
            if rel.startswith("..") or rel in (f"{info_dir}/RECORD", f"{info_dir}/INSTALLER"):
                continue
            if rel == f"{info_dir}/REQUESTED" or rel == f"{info_dir}/direct_url.json":
                continue
            data = Path(f.locate()).read_bytes()
            z.writestr(rel, data)
            rows.append((rel, _digest(data), str(len(data))))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*rows, (f"{info_dir}/RECORD", "", "")])
        z.writestr(f"{info_dir}/RECORD", buf.getvalue())
    return wheel


def requirements(name: str) -> list[str]:
    """The names NAME requires here (markers evaluated; extras' requirements left out)."""
    from packaging.requirements import Requirement

    found = []
    for line in metadata.distribution(name).requires or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            found.append(req.name)
    return found


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    todo, done = list(sys.argv[2:]), set()
    while todo:
        name = todo.pop()
        key = metadata.distribution(name).metadata["Name"].lower().replace("_", "-")
        if key in done:
            continue
        done.add(key)
        wheel = repack(name, out)
        print(f"repack_installed: {wheel.name} {wheel.stat().st_size / 1e6:.1f} MB")
        todo += requirements(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
