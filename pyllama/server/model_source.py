"""Where the model file comes from when ``-m`` names none: ``-hf`` (the hub cache that
llama.cpp shares, downloading into it unless ``--offline``), ``-dr`` (Docker Hub, see
``docker_repo``), ``-mu`` (a URL, downloaded into the cache once), else the demo model. Runs on the loader thread."""

from __future__ import annotations

from pyllama.model_file import ModelFileError
from pyllama.server.settings import Settings

__all__ = ["draft_path", "model_path", "source_name"]


def _hub(repo_tag: str, hf_file: str | None, offline: bool, token: str | None, flag: str) -> str:
    from pyllama import hub

    try:
        repo, tag = hub.split_repo_tag(repo_tag)
        if hf_file:  # the named file wins over the tag, as llama-server's -hff
            cached = hub.resolve(repo, hf_file)
            if cached is not None:
                return str(cached)
            # that very file (a repository may hold several of one quantization)
            return str(hub.download(repo, offline=offline, token=token, filename=hf_file))
        return str(hub.download(f"{repo}:{tag}" if tag else repo, offline=offline, token=token))
    except (hub.HubError, ValueError) as e:
        raise ModelFileError(f"{flag} {repo_tag}: {e}") from e


def model_path(s: Settings) -> str:
    if s.model is not None and s.model_url:  # llama.cpp downloads -mu into -m's path
        from pyllama.server.media.download import fetch_url

        try:
            return fetch_url(s.model_url, offline=s.offline, flag="--model-url", path=s.model)
        except ValueError as e:
            raise ModelFileError(str(e)) from e
    if s.model is not None:
        return s.model
    if s.hf_repo:
        return _hub(s.hf_repo, s.hf_file, s.offline, s.hf_token, "--hf-repo")
    if s.docker_repo:
        from pyllama.server.docker_repo import resolve

        try:
            return resolve(s.docker_repo, offline=s.offline)
        except ValueError as e:
            raise ModelFileError(str(e)) from e
    if s.model_url:
        from pyllama.server.media.download import fetch_url

        try:
            return fetch_url(s.model_url, offline=s.offline, flag="--model-url")
        except ValueError as e:
            raise ModelFileError(str(e)) from e
    from pyllama.models import demo_model

    return demo_model(offline=s.offline)


def draft_path(s: Settings) -> str | None:
    if s.model_draft is not None:
        return s.model_draft
    if s.draft_hf_repo:
        return _hub(s.draft_hf_repo, s.draft_hf_file, s.offline, s.hf_token, "--spec-draft-hf")
    return None


def source_name(s: Settings, path: str) -> str:
    """The model's name when no ``--alias`` gives one, as llama.cpp's
    ``common_params_model::get_name``: the ``-hf`` repository as written (tag included), else
    the ``-dr`` reference, else the path loaded (``-m`` as written, or where ``-mu`` or the
    demo model lies)."""
    return s.hf_repo or s.docker_repo or path
