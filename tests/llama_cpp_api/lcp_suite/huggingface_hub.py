"""Stand-in for the one ``huggingface_hub`` call llama-cpp-python's tests make: its hub
models are replaced by local files (no hub here), on whichever side runs the suite.
``LCP_SUITE_MODELS`` is a JSON object: "repo_id/filename" -> a local path."""

from __future__ import annotations

import json
import os


def hf_hub_download(repo_id: str, filename: str, **kwargs: object) -> str:
    models = json.loads(os.environ["LCP_SUITE_MODELS"])
    key = f"{repo_id}/{filename}"
    if key not in models:
        raise FileNotFoundError(f"{key}: no local stand-in (the hub is not reachable here)")
    return models[key]
