"""A win_amd64 wheel of pyllama from the cross-build (ci/windows/build.sh) and the source tree.

What scikit-build-core puts in a wheel, laid out the same way: the `pyllama` package as it
is in the tree (Python files, the chat page, stubs) with CMake's install of the
`pyllama` component over it (_core.cp313-win_amd64.pyd, lib/*.dll, licenses/), and a
.dist-info made from pyproject.toml (metadata with every extra, console scripts, RECORD).

    python ci/windows/make_wheel.py --install build/win64/install --out build/win-dist
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import sys
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
TAG = "cp313-cp313-win_amd64"


def metadata(project: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']['text']}",
    ]
    lines += [f"Requires-Dist: {req}" for req in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for text in reqs:
            req = Requirement(text)
            marker = f'extra == "{extra}"'
            if req.marker is not None:
                marker = f"({req.marker}) and {marker}"
            req.marker = None
            lines.append(f"Requires-Dist: {req}; {marker}")
    return "\n".join(lines) + "\n\n" + (ROOT / "README.md").read_text(encoding="utf-8")


# python.org CPython 3.13 on Windows x64, for the markers of a requirement
WINDOWS = {
    "sys_platform": "win32",
    "platform_system": "Windows",
    "os_name": "nt",
    "platform_machine": "AMD64",
    "python_version": "3.13",
    "python_full_version": "3.13.2",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def windows_requirements(project: dict, extras: list[str]) -> list[str]:
    """The requirements of pyllama with ``extras`` on Windows (markers evaluated for it:
    pip, run on Linux for the win_amd64 platform, evaluates them for Linux)."""
    out = []
    texts = [(t, "") for t in project.get("dependencies", [])]
    texts += [(t, e) for e in extras for t in project["optional-dependencies"][e]]
    for text, extra in texts:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({**WINDOWS, "extra": extra}):
            continue
        if req.name == project["name"]:  # an extra naming another: pyllama-engine[server]
            out += windows_requirements(project, sorted(req.extras))
            continue
        req.marker = None
        out.append(str(req))
    return out


def package_files(install: Path) -> dict[str, bytes]:
    """archive name -> contents: the tree's pyllama/ without build output, then the install."""
    files: dict[str, bytes] = {}
    for path in sorted((ROOT / "pyllama").rglob("*")):
        rel = path.relative_to(ROOT).as_posix()
        if (
            not path.is_file()
            or "__pycache__" in path.parts
            or path.suffix in (".so", ".pyd", ".dll")
            or rel.startswith("pyllama/lib/")
        ):
            continue
        files[rel] = path.read_bytes()
    for path in sorted((install / "pyllama").rglob("*")):
        if path.is_file():
            files[path.relative_to(install).as_posix()] = path.read_bytes()
    return files


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--install", type=Path, help="CMake's install prefix")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--requirements",
        metavar="EXTRA",
        nargs="*",
        help="print the requirements on Windows with these extras, one a line, and stop",
    )
    args = ap.parse_args()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    if args.requirements is not None:
        print("\n".join(windows_requirements(project, args.requirements)))
        return
    if args.install is None or args.out is None:
        ap.error("--install and --out make a wheel")
    if not (args.install / "pyllama" / "_core.cp313-win_amd64.pyd").is_file():
        raise SystemExit(f"make_wheel: no _core.cp313-win_amd64.pyd under {args.install}/pyllama")
    dist = f"{project['name'].replace('-', '_')}-{project['version']}"
    info = f"{dist}.dist-info"
    files = package_files(args.install)
    files[f"{info}/METADATA"] = metadata(project).encode()
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: pyllama ci/windows/make_wheel.py\nRoot-Is-Purelib: false\nTag: {TAG}\n"
    ).encode()
    scripts = "".join(f"{name} = {target}\n" for name, target in project["scripts"].items())
    files[f"{info}/entry_points.txt"] = f"[console_scripts]\n{scripts}".encode()
    files[f"{info}/licenses/LICENSE"] = (ROOT / "LICENSE").read_bytes()
    record = [record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    args.out.mkdir(parents=True, exist_ok=True)
    wheel = args.out / f"{dist}-{TAG}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    print(f"make_wheel: {wheel} ({wheel.stat().st_size / 1e6:.1f} MB, {len(files)} files)")


if __name__ == "__main__":
    main()
