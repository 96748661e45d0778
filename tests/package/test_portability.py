"""What differs between platforms, checked on real files, pipes and sockets of this one:
library names, plugin DLL folders, the hub cache's home, listen options, pipe polling."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from pyllama import hub
from pyllama.ftype import libllama_path
from pyllama.plugins import dll_directories
from pyllama.server.http.listen import unsupported
from pyllama.server.media.video import find_tools
from pyllama.server.tools.mcp.client import _readable


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize(
    ("platform", "present", "chosen"),
    [
        ("linux", [], "libllama.so"),  # the name ctypes then fails to open, as before
        ("linux", ["libllama.so"], "libllama.so"),
        ("darwin", ["libllama.dylib"], "libllama.dylib"),
        ("win32", ["libllama.dll"], "libllama.dll"),  # a MinGW build
        ("win32", ["llama.dll"], "llama.dll"),  # MSVC or clang
        ("win32", ["llama.dll", "libllama.dll"], "llama.dll"),
        ("win32", ["libllama.so"], "llama.dll"),  # another platform's file is not taken
    ],
)
def test_libllama_is_the_platforms_file_that_exists(
    tmp_path: Path, platform: str, present: list[str], chosen: str
) -> None:
    for name in present:
        _touch(tmp_path / name)
    assert libllama_path(tmp_path, platform) == tmp_path / chosen


def test_libllama_default_platform_is_this_one(tmp_path: Path) -> None:
    assert libllama_path(tmp_path) == libllama_path(tmp_path, sys.platform)


def test_plugin_dll_folders_are_the_core_lib_and_the_nvidia_wheels_dll_folders(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site-packages"
    plugin = site / "pyllama_plugins" / "cuda"
    _touch(plugin / "ggml-cuda.dll")
    _touch(site / "nvidia" / "cu13" / "bin" / "x86_64" / "cudart64_13.dll")  # CUDA 13 wheels
    _touch(site / "nvidia" / "cu13" / "bin" / "x86_64" / "cublas64_13.dll")
    _touch(site / "nvidia" / "cublas" / "bin" / "cublas64_12.dll")  # the older layout
    _touch(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")  # Linux: not a DLL folder
    _touch(site / "nvidia" / "cu13" / "bin" / "nvcc.exe")  # no DLL beside it
    core_lib = site / "pyllama" / "lib"
    assert dll_directories(plugin, core_lib) == [
        core_lib,
        site / "nvidia" / "cu13" / "bin" / "x86_64",
        site / "nvidia" / "cublas" / "bin",
    ]


def test_plugin_dll_folders_without_nvidia_wheels(tmp_path: Path) -> None:
    plugin = tmp_path / "pyllama_plugins" / "vulkan"
    plugin.mkdir(parents=True)
    assert dll_directories(plugin, tmp_path / "lib") == [tmp_path / "lib"]


def test_hub_cache_without_any_variable_is_under_the_accounts_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in (
        "LLAMA_CACHE",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_HOME",
        "XDG_CACHE_HOME",
        "HOME",
        "USERPROFILE",
    ):
        monkeypatch.delenv(var, raising=False)
    if os.name == "nt":
        home = Path.home()
    else:  # the password database, as llama.cpp's getpwuid
        import pwd

        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert hub.cache_directory() == home / ".cache" / "huggingface" / "hub"


def test_hub_cache_home_variable_is_the_platforms(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("LLAMA_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("USERPROFILE" if os.name == "nt" else "HOME", str(tmp_path))
    assert hub.cache_directory() == tmp_path / ".cache" / "huggingface" / "hub"


def test_plain_tcp_listening_is_supported_everywhere() -> None:
    assert unsupported(["127.0.0.1", "::1"], reuse_port=False) == ""


def test_listen_options_the_platform_lacks_are_refused_naming_the_flag() -> None:
    reuse = unsupported(["127.0.0.1"], reuse_port=True)
    unix = unsupported(["127.0.0.1", "server.sock"], reuse_port=False)
    assert (reuse == "") == hasattr(socket, "SO_REUSEPORT")
    assert reuse == "" or reuse.startswith("--reuse-port")
    assert (unix == "") == hasattr(socket, "AF_UNIX")
    assert unix == "" or unix.startswith("--host server.sock")


def test_ffmpeg_dir_holds_the_platforms_program_names(tmp_path: Path) -> None:
    exe = ".exe" if os.name == "nt" else ""
    for name in ("ffmpeg", "ffprobe"):
        _touch(tmp_path / (name + exe)).chmod(0o755)
    assert find_tools(str(tmp_path)) == (
        str(tmp_path / ("ffmpeg" + exe)),
        str(tmp_path / ("ffprobe" + exe)),
    )


def test_mcp_pipe_poll_sees_data_silence_and_eof() -> None:
    r, w = os.pipe()
    try:
        start = time.monotonic()
        assert not _readable(r, 0.2)  # silent: waits the timeout out
        assert time.monotonic() - start >= 0.15
        os.write(w, b"x")
        assert _readable(r, 5.0)
        assert os.read(r, 16) == b"x"
        os.close(w)
        w = -1
        assert _readable(r, 5.0)  # the writer is gone: a read returns EOF at once
        assert os.read(r, 16) == b""
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
