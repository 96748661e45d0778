"""A local stand-in for the Hugging Face hub's HTTP API, standard library only.

It answers the requests that both hub clients in play make, over plain HTTP:
``pyllama.hub`` and llama.cpp's downloader (``common/hf-cache.cpp``, ``common/download.cpp``;
llama-server built without TLS can reach nothing else)::

    GET  /api/models/ORG/REPO[/revision/REV]        {"id", "sha", "siblings": [{"rfilename"}]}
    GET  /api/models/ORG/REPO/refs                  {"branches": [{"name": "main",
                                                     "targetCommit": C}], ...}
    GET  /api/models/ORG/REPO/tree/REV?recursive=true
                                                    the files: type, path, oid, size and, for
                                                    LFS files, lfs {oid (sha256), size}
    HEAD|GET /ORG/REPO/resolve/REV/PATH             an LFS file: 302 to /cdn/... (or to
                                                    http://CDN_HOST:PORT/cdn/...), with
                                                    X-Linked-Etag, X-Linked-Size and
                                                    X-Repo-Commit, as the hub; a small file:
                                                    its bytes
    HEAD|GET /cdn/ORG/REPO/C/PATH                   the bytes: Content-Length, ETag "sha256",
                                                    Accept-Ranges, Range "bytes=N-[M]" -> 206

REV is the commit or ``main``. Anything else is a 404 with the hub's ``{"error": ...}``.
Every request is recorded (``FakeHub.requests``); the CLI also logs each to stderr.

In tests: ``FakeHub()`` runs in a thread; put ``FakeRepo`` objects in ``hub.repos``.
``FakeHub(cdn_host="localhost")`` redirects LFS files to that host name (same server) as
the hub does to its file store, another host: llama.cpp's HTTP client (cpp-httplib) follows
a redirect to the same host on the same client object and one to another host on a new one;
several downloads at once (a split model's shards, a model and its projector) sometimes
lose one (status -1) on the first path, never on the second.
As a script (ci/peer_tests.sh)::

    python tests/helpers/fake_hub.py --port 0 --port-file F --serve ORG/REPO=FILE_NAME=LOCAL_PATH ...

serves each LOCAL_PATH as FILE_NAME of ORG/REPO (FILE_NAME may hold folders), at the commit
``commit_for(ORG/REPO)`` (the sha1 of the name), writes the port it listens on to F once
it does, and runs until SIGTERM or SIGINT. ``--serve`` files are LFS files (listed with an
lfs block, fetched through the /cdn/ redirect), ``--serve-small`` ones plain git files (as
the hub keeps a small text file such as a ``preset.ini``), served by ``resolve`` itself.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"  # FakeRepo's default commit
BLOCK = 1 << 20


def commit_for(repo: str) -> str:
    """The commit the CLI gives ``repo``: the sha1 of its name (``printf %s REPO | sha1sum``)."""
    return hashlib.sha1(repo.encode()).hexdigest()


@dataclass
class FakeFile:
    data: bytes | Path
    lfs: bool = True  # listed with an lfs block and served through the /cdn/ redirect
    bad_sha: bool = False  # the listing gives a sha256 the bytes do not have
    _sha: str = field(default="", repr=False)

    def size(self) -> int:
        return self.data.stat().st_size if isinstance(self.data, Path) else len(self.data)

    def read(self, start: int, end: int) -> Iterator[bytes]:
        if isinstance(self.data, bytes):
            for i in range(start, end, BLOCK):
                yield self.data[i : min(end, i + BLOCK)]
            return
        with self.data.open("rb") as f:
            f.seek(start)
            left = end - start
            while left > 0:
                block = f.read(min(left, BLOCK))
                if not block:
                    return
                left -= len(block)
                yield block

    def sha256(self) -> str:
        """The sha256 of the bytes (computed once), or a wrong one for ``bad_sha``."""
        if self.bad_sha:
            return "f" * 64
        if not self._sha:
            h = hashlib.sha256()
            for block in self.read(0, self.size()):
                h.update(block)
            self._sha = h.hexdigest()
        return self._sha

    def git_oid(self, path: str) -> str:
        return hashlib.sha1(f"{path}:{self.size()}".encode()).hexdigest()


@dataclass
class FakeRepo:
    files: dict[str, FakeFile]
    commit: str = COMMIT
    delay: float = 0.0  # seconds per MiB sent
    cut_once: set[str] = field(default_factory=set)  # paths whose first GET stops half-way
    # set: every GET of a file's bytes waits here after its first block, until the test
    # sets it (a download held in flight while another client starts)
    hold: threading.Event | None = None


class Seen(NamedTuple):
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # names in lower case


class FakeHub:
    """The hub's API for the repositories in ``repos`` on 127.0.0.1:``port`` (0: a free
    one), answered from a thread per connection; ``url`` has no trailing slash."""

    def __init__(self, port: int = 0, log: bool = False, cdn_host: str | None = None) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.cdn_host = cdn_host
        self.requests: list[Seen] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                if log:
                    sys.stderr.write(f"fake hub: {format % args}\n")

            def _handle(self, head: bool) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                hub.requests.append(Seen(self.command, self.path, headers))
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    hub.answer(self, head)

            def do_GET(self) -> None:
                self._handle(head=False)

            def do_HEAD(self) -> None:
                self._handle(head=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self, method: str = "GET") -> list[str]:
        """The paths of the ``method`` requests so far, in order."""
        return [s.path for s in self.requests if s.method == method]

    # ------------------------------------------------------------------------- answers
    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, body: Any, head: bool) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if not head:
            h.wfile.write(data)

    def answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        # "." segments dropped: huggingface_hub asks for resolve/REV/./FILE
        parts = [p for p in unquote(urlsplit(h.path).path).strip("/").split("/") if p != "."]
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo = self.repos.get(f"{parts[2]}/{parts[3]}")
            if repo is None:
                return self._json(h, 404, {"error": "Repository not found"}, head)
            if len(parts) == 4 or (
                parts[4] == "revision" and parts[5:] in ([repo.commit], ["main"])
            ):
                return self._json(h, 200, self._info(f"{parts[2]}/{parts[3]}", repo), head)
            if parts[4:] == ["refs"]:
                branch = {"name": "main", "ref": "refs/heads/main", "targetCommit": repo.commit}
                body = {"branches": [branch], "converts": [], "tags": []}
                return self._json(h, 200, body, head)
            if parts[4] == "tree" and parts[5:] in ([repo.commit], ["main"]):
                return self._json(h, 200, self._tree(repo), head)
            return self._json(h, 404, {"error": "Not found"}, head)
        if len(parts) >= 5 and parts[2] == "resolve":
            repo_id, rev, name = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
            repo = self.repos.get(repo_id)
            if repo is None or rev not in (repo.commit, "main") or name not in repo.files:
                return self._json(h, 404, {"error": "Entry not found"}, head)
            f = repo.files[name]
            if not f.lfs:  # small files come from the hub itself
                return self._send_file(h, repo, name, head, {"X-Repo-Commit": repo.commit})
            h.send_response(302)  # as the hub: an LFS file's bytes come from its file store
            where = f"/cdn/{repo_id}/{repo.commit}/{quote(name)}"
            if self.cdn_host:
                where = f"http://{self.cdn_host}:{self.port}{where}"
            h.send_header("Location", where)
            h.send_header("X-Repo-Commit", repo.commit)
            h.send_header("X-Linked-Etag", f'"{f.sha256()}"')
            h.send_header("X-Linked-Size", str(f.size()))
            h.send_header("ETag", f'"{f.git_oid(name)}"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        if parts[0] == "cdn" and len(parts) >= 5:
            repo = self.repos.get(f"{parts[1]}/{parts[2]}")
            name = "/".join(parts[4:])
            if repo is None or parts[3] != repo.commit or name not in repo.files:
                return self._json(h, 404, {"error": "Not found"}, head)
            # huggingface_hub follows a redirect to the same host and wants the hub's
            # headers at its end (the real file store is another host it does not follow)
            extra = {
                "X-Repo-Commit": repo.commit,
                "X-Linked-Etag": f'"{repo.files[name].sha256()}"',
            }
            return self._send_file(h, repo, name, head, extra)
        return self._json(h, 404, {"error": "Not found"}, head)

    @staticmethod
    def _info(repo_id: str, repo: FakeRepo) -> dict[str, Any]:
        """The model info (huggingface_hub's ``model_info``, which its file system asks)."""
        siblings = [{"rfilename": name} for name in repo.files]
        return {
            "id": repo_id,
            "modelId": repo_id,
            "sha": repo.commit,
            "private": False,
            "siblings": siblings,
        }

    @staticmethod
    def _tree(repo: FakeRepo) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = [{"type": "directory", "path": "docs", "oid": "0" * 40}]
        for name, f in repo.files.items():
            item: dict[str, Any] = {"type": "file", "path": name, "size": f.size()}
            item["oid"] = f.git_oid(name)
            if f.lfs:
                item["lfs"] = {"oid": f.sha256(), "size": f.size(), "pointerSize": 134}
            items.append(item)
        return items

    def _send_file(
        self,
        h: BaseHTTPRequestHandler,
        repo: FakeRepo,
        name: str,
        head: bool,
        extra: dict[str, str],
    ) -> None:
        f = repo.files[name]
        size = f.size()
        start, end, status = 0, size, 200
        rng = h.headers.get("Range", "")
        if rng.startswith("bytes=") and "-" in rng and not head:
            first, _, last = rng[len("bytes=") :].partition("-")
            if not first.isdigit() or int(first) >= max(size, 1) or (last and not last.isdigit()):
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{size}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            start, status = int(first), 206
            end = min(size, int(last) + 1) if last else size
        cut = not head and name in repo.cut_once
        repo.cut_once.discard(name)
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", f'"{f.sha256()}"' if f.lfs else f'"{f.git_oid(name)}"')
        for k, v in extra.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(end - start))
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        h.end_headers()
        if head:
            return
        sent = 0
        for block in f.read(start, end):
            if cut and sent >= (end - start) // 2:
                h.close_connection = True
                h.wfile.flush()
                h.connection.shutdown(2)  # the connection drops mid-file
                return
            h.wfile.write(block)
            if repo.hold is not None and not sent:
                h.wfile.flush()
                repo.hold.wait(300)
            sent += len(block)
            if repo.delay:
                time.sleep(repo.delay * len(block) / BLOCK)


# ----------------------------------------------------------------------------------- CLI


def _parse_serve(specs: list[str], small: list[str] | None = None) -> dict[str, FakeRepo]:
    """The repositories of ``--serve`` (LFS) and ``--serve-small`` (plain git) specs."""
    repos: dict[str, FakeRepo] = {}
    # one per local file and kind: its sha256 is computed once
    files: dict[tuple[Path, bool], FakeFile] = {}
    for spec, lfs in [(s, True) for s in specs] + [(s, False) for s in small or []]:
        flag = "--serve" if lfs else "--serve-small"
        repo, sep, rest = spec.partition("=")
        name, sep2, local = rest.partition("=")
        if not (sep and sep2 and repo.count("/") == 1 and name and local):
            raise SystemExit(f"{flag} {spec!r}: expected ORG/REPO=FILE_NAME=LOCAL_PATH")
        path = Path(local)
        if not path.is_file():
            raise SystemExit(f"{flag} {spec!r}: {local} is not a file")
        entry = repos.setdefault(repo, FakeRepo({}, commit=commit_for(repo)))
        entry.files[name] = files.setdefault((path, lfs), FakeFile(path, lfs=lfs))
    return repos


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0: a free port (see --port-file)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument(
        "--serve",
        action="append",
        default=[],
        metavar="ORG/REPO=FILE_NAME=LOCAL_PATH",
        help="serve LOCAL_PATH as FILE_NAME of ORG/REPO, an LFS file (repeatable)",
    )
    ap.add_argument(
        "--serve-small",
        action="append",
        default=[],
        metavar="ORG/REPO=FILE_NAME=LOCAL_PATH",
        help="the same, a plain git file (a small text file such as preset.ini)",
    )
    ap.add_argument(
        "--cdn-host",
        help="redirect LFS files to http://CDN_HOST:PORT/cdn/... (this server under another "
        "name, e.g. localhost), as the hub to its file store; default: a relative /cdn/...",
    )
    ap.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    args = ap.parse_args(argv)
    repos = _parse_serve(args.serve, args.serve_small)
    for repo in repos.values():  # hash now, not while a client waits for the listing
        for f in repo.files.values():
            f.sha256()
    hub = FakeHub(args.port, log=not args.quiet, cdn_host=args.cdn_host)
    hub.repos.update(repos)
    if args.port_file:
        tmp = f"{args.port_file}.tmp"
        Path(tmp).write_text(str(hub.port))
        os.replace(tmp, args.port_file)
    print(f"fake hub: {hub.url} serving {', '.join(sorted(repos)) or 'nothing'}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    hub.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
