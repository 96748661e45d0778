"""Router mode's model discovery: which models exist and how a child runs each.

Sources, later ones overriding earlier ones of the same name: pyllama's own model cache;
the hub cache that llama-server shares (``org/repo:TAG``, see ``pyllama.hub``); a
``--models-dir`` (a ``.gguf`` file, or a sub-directory holding one, as llama-server scans
it); a ``--models-preset`` INI file (one section per model; keys are llama-server's long
flags without dashes, ``model`` is the GGUF path or ``hf-repo`` a cached hub model, ``[*]``
applies to all; ``dedup-cache-models`` hides the hub-cache entries a preset stands for).

Discovery reads local files only, never the network: a preset's ``hf-repo`` that is not in
the cache is listed and fails to load with the reason. Plain functions, no state; the
router calls ``scan`` on its event loop (the reads are small: directory listings, an INI).
"""

from __future__ import annotations

import configparser
import os
import sys
from pathlib import Path

from pyllama import hub
from pyllama.server.http.errors import APIError
from pyllama.server.router.entry import ModelEntry

__all__ = ["scan"]

_TRUE = ("true", "on", "1", "yes", "")
_FALSE = ("false", "off", "0", "no")


def _scan_dir(root: Path) -> list[ModelEntry]:
    if not root.is_dir():
        raise APIError(400, f"--models-dir '{root}' does not exist or is not a directory")
    out = []
    for item in sorted(root.iterdir()):
        if item.is_dir():
            ggufs = sorted(p for p in item.glob("*.gguf") if "mmproj" not in p.name)
            shard = [p for p in ggufs if "-00001-of-" in p.name]
            mmproj = sorted(item.glob("*mmproj*.gguf"))  # as llama-server: a folder's projector
            if ggufs:
                entry = ModelEntry(item.name, "models_dir", str((shard or ggufs)[0]))
                entry.mmproj = str(mmproj[-1]) if mmproj else None
                out.append(entry)
        elif item.suffix == ".gguf" and "mmproj" not in item.name:
            out.append(ModelEntry(item.stem, "models_dir", str(item)))
    return out


# preset keys that name a hub model (llama-server's flag names, without dashes)
_HF_REPO = ("hf-repo", "hf", "hfr")
_HF_FILE = ("hf-file", "hff")
_DRAFT_HF = ("spec-draft-hf", "hfd", "hfrd", "hf-repo-draft")
_DRAFT_FILE = ("spec-draft-model", "model-draft", "md")
# preset keys for the router itself, never a child's flag
_ROUTER_KEYS = ("model", "m", "alias", "a", "tags", "load-on-startup", "stop-timeout")
_ROUTER_KEYS += ("dedup-cache-models",)


def _hub_path(name: str, hf_file: str = "") -> tuple[str | None, str]:
    """(cached GGUF for a hub name, or None; why not)."""
    try:
        path = hub.resolve(name, hf_file)
    except (ValueError, OSError) as e:
        return None, str(e)
    if path is None:
        return None, f"'{name}' is not in the hub cache ({hub.cache_directory()})"
    return os.path.abspath(path), ""  # as _scan_hub_cache's, which dedup compares with


def _preset_entry(name: str, section: configparser.SectionProxy) -> ModelEntry:
    values = {k.strip().lower().replace("_", "-"): v.strip() for k, v in section.items()}

    def first(keys: tuple[str, ...]) -> str:
        return next((values[k] for k in keys if values.get(k)), "")

    path: str | None = None
    missing = ""
    model = first(("model", "m"))
    repo = first(_HF_REPO)
    if model and Path(model).is_file():
        path = model
    elif repo:
        path, missing = _hub_path(repo, first(_HF_FILE))
    else:
        missing = f"'{model}' is not a file" if model else "the preset names no model"
    args: list[str] = []
    draft = first(_DRAFT_HF)
    if draft:  # the draft model from the hub cache: a local path for the child
        draft_path, why = _hub_path(draft, first(_DRAFT_FILE))
        if draft_path is None:
            path, missing = None, f"draft model: {why}"
        else:
            args += ["-md", draft_path]
    skip = set(_ROUTER_KEYS + _HF_REPO + _HF_FILE + _DRAFT_HF + (_DRAFT_FILE if draft else ()))
    for key, value in values.items():
        if key in skip:
            continue
        flag = "--" + key
        if value.lower() in _TRUE:
            args.append(flag)
        elif value.lower() not in _FALSE:
            args += [flag, value]
    text = f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in section.items())
    aliases = [a.strip() for a in section.get("alias", "").split(",") if a.strip()]
    entry = ModelEntry(name, "preset", path, args=args, preset=text, aliases=aliases)
    entry.missing = missing
    return entry


def _read_preset(path: Path) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(default_section="*", interpolation=None)
    ini.optionxform = str.lower  # type: ignore[assignment,method-assign]
    try:
        ini.read_string(path.read_text(encoding="utf-8"))
    except (OSError, configparser.Error) as e:
        raise APIError(400, f"--models-preset '{path}': {e}") from e
    return ini


def _dedup_paths(ini: configparser.ConfigParser) -> set[str]:
    """Files that presets with ``dedup-cache-models`` on use: the hub-cache models behind
    them are left out of the listing (llama-server's ``hidden``)."""
    out = set()
    for name in ini.sections():
        section = ini[name]  # falls back to [*] for keys the section lacks
        if section.get("dedup-cache-models", "0").strip().lower() not in ("1", "true", "on"):
            continue
        values = {k.replace("_", "-"): v.strip() for k, v in section.items()}
        for repo_keys, file_keys in ((_HF_REPO, _HF_FILE), (_DRAFT_HF, _DRAFT_FILE)):
            repo = next((values[k] for k in repo_keys if values.get(k)), "")
            hf_file = next((values[k] for k in file_keys if values.get(k)), "")
            if repo:
                path, _ = _hub_path(repo, hf_file)
                if path:
                    out.add(path)
    return out


def _scan_pyllama_cache() -> list[ModelEntry]:
    from pyllama.models import cache_dir

    root = cache_dir() / "models"
    if not root.is_dir():
        return []
    return [ModelEntry(p.stem, "cache", str(p)) for p in sorted(root.glob("*.gguf"))]


def _scan_hub_cache() -> list[ModelEntry]:
    try:
        cached = hub.list_cached()
    except OSError as e:  # an unreadable cache hides its models, it does not stop the router
        print(f"pyllama-server: cannot read the hub cache: {e}", file=sys.stderr, flush=True)
        return []
    out = []
    for m in cached:
        path = os.path.abspath(m.path) if m.path else None  # LLAMA_CACHE may be relative
        entry = ModelEntry(m.name, "cache", path, hub=True)
        entry.mmproj = os.path.abspath(m.mmproj) if m.mmproj else None
        entry.missing = "" if m.path else "no model file for this tag in the hub cache"
        out.append(entry)
    return out


def scan(models_dir: str | None, preset_path: str | None) -> dict[str, ModelEntry]:
    """Every model the sources name, by name (fresh entries, status ``unloaded``)."""
    found: dict[str, ModelEntry] = {}
    for entry in [*_scan_pyllama_cache(), *_scan_hub_cache()]:
        found[entry.name] = entry
    if models_dir:
        for entry in _scan_dir(Path(models_dir)):
            found[entry.name] = entry
    if preset_path:
        ini = _read_preset(Path(preset_path))
        for name in ini.sections():
            found[name] = _preset_entry(name, ini[name])
        hide = _dedup_paths(ini)
        for entry in found.values():
            entry.hidden = entry.hub and entry.path in hide
    return found
