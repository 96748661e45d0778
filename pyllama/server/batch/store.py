"""Files and batches on disk: an SQLite database (WAL) and the files' bytes beside it, in one
directory (``--batch-dir``). Everything a restart needs is here: a batch's state, and each
finished line's answer, written once (``record``: the first answer of a line wins), so a
batch that was running resumes with the lines it had not finished.

One connection, used under a lock from the event loop's thread and the runner's threads:
each call is a short transaction (milliseconds); file bytes are read and written outside it.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BatchRow", "BatchStore", "FileRow", "new_id"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
  id TEXT PRIMARY KEY, owner TEXT NOT NULL, purpose TEXT NOT NULL, filename TEXT NOT NULL,
  bytes INTEGER NOT NULL, created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
  id TEXT PRIMARY KEY, owner TEXT NOT NULL, endpoint TEXT NOT NULL, input_file_id TEXT NOT NULL,
  completion_window TEXT NOT NULL, metadata TEXT, status TEXT NOT NULL, errors TEXT,
  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, times TEXT NOT NULL DEFAULT '{}',
  output_file_id TEXT, error_file_id TEXT, total INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS lines (
  batch_id TEXT NOT NULL, idx INTEGER NOT NULL, ok INTEGER NOT NULL, result TEXT NOT NULL,
  PRIMARY KEY (batch_id, idx)
);
"""

# a batch's states (OpenAI's); the runner drives the unfinished ones
UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


@dataclass
class FileRow:
    id: str
    owner: str
    purpose: str
    filename: str
    bytes: int
    created_at: int

    def api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.bytes,
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class BatchRow:
    id: str
    owner: str
    endpoint: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, Any] | None
    status: str
    errors: list[dict[str, Any]] | None
    created_at: int
    expires_at: int
    times: dict[str, int]
    output_file_id: str | None
    error_file_id: str | None
    total: int
    completed: int = 0
    failed: int = 0

    def api(self) -> dict[str, Any]:
        t = self.times
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None if not self.errors else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "in_progress_at": t.get("in_progress"),
            "expires_at": self.expires_at,
            "finalizing_at": t.get("finalizing"),
            "completed_at": t.get("completed"),
            "failed_at": t.get("failed"),
            "expired_at": t.get("expired"),
            "cancelling_at": t.get("cancelling"),
            "cancelled_at": t.get("cancelled"),
            "request_counts": {
                "total": self.total,
                "completed": self.completed,
                "failed": self.failed,
            },
            "metadata": self.metadata,
        }


class BatchStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.files_dir = self.root / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.root / "batches.sqlite3", check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._runner_lock: Any = None

    def lead(self) -> bool:
        """Whether this process runs the directory's batches: the one holding an exclusive
        lock on its ``runner.lock`` (replicas sharing the directory serve the API, one runs
        the lines; the kernel drops the lock of a process that dies, even by ``kill -9``,
        and another takes over). Without ``fcntl`` (Windows) every process runs."""
        if self._runner_lock is not None:
            return True
        try:
            import fcntl
        except ImportError:
            return True
        f = open(self.root / "runner.lock", "a+")  # noqa: SIM115 - held while we lead
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            return False
        self._runner_lock = f
        return True

    def close(self) -> None:
        with self._lock:
            self._db.close()
        if self._runner_lock is not None:
            self._runner_lock.close()

    def _rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _exec(self, sql: str, *args: Any) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    # ------------------------------------------------------------------ files

    def path(self, file_id: str) -> Path:
        return self.files_dir / file_id

    def temp_path(self) -> Path:
        return self.files_dir / f".part-{secrets.token_hex(8)}"

    def add_file(self, owner: str, purpose: str, filename: str, temp: Path) -> FileRow:
        """A file whose bytes were written to ``temp``: renamed into place, then listed."""
        row = FileRow(
            new_id("file"), owner, purpose, filename, temp.stat().st_size, int(time.time())
        )
        os.replace(temp, self.path(row.id))
        self._exec(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)",
            row.id, row.owner, row.purpose, row.filename, row.bytes, row.created_at,
        )  # fmt: skip
        return row

    def file(self, file_id: str, owner: str) -> FileRow | None:
        rows = self._rows("SELECT * FROM files WHERE id = ? AND owner = ?", file_id, owner)
        return FileRow(*rows[0]) if rows else None

    def files(self, owner: str, purpose: str | None) -> list[FileRow]:
        sql, args = "SELECT * FROM files WHERE owner = ?", [owner]
        if purpose is not None:
            sql, args = sql + " AND purpose = ?", [*args, purpose]
        return [FileRow(*r) for r in self._rows(sql + " ORDER BY created_at, id", *args)]

    def delete_file(self, file_id: str, owner: str) -> bool:
        if not self._exec("DELETE FROM files WHERE id = ? AND owner = ?", file_id, owner):
            return False
        self.path(file_id).unlink(missing_ok=True)
        return True

    # ---------------------------------------------------------------- batches

    def add_batch(self, row: BatchRow) -> None:
        self._exec(
            "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row.id, row.owner, row.endpoint, row.input_file_id, row.completion_window,
            json.dumps(row.metadata), row.status, json.dumps(row.errors), row.created_at,
            row.expires_at, json.dumps(row.times), row.output_file_id, row.error_file_id,
            row.total,
        )  # fmt: skip

    def _batch(self, r: tuple[Any, ...]) -> BatchRow:
        (id_, owner, endpoint, input_file, window, meta, status, errors, created, expires,
         times, out, err, total) = r  # fmt: skip
        counts = dict(
            self._rows("SELECT ok, COUNT(*) FROM lines WHERE batch_id = ? GROUP BY ok", id_)
        )
        return BatchRow(
            id_, owner, endpoint, input_file, window, json.loads(meta), status,
            json.loads(errors), created, expires, json.loads(times), out, err, total,
            counts.get(1, 0), counts.get(0, 0),
        )  # fmt: skip

    def batch(self, batch_id: str, owner: str | None = None) -> BatchRow | None:
        if owner is None:
            rows = self._rows("SELECT * FROM batches WHERE id = ?", batch_id)
        else:
            rows = self._rows("SELECT * FROM batches WHERE id = ? AND owner = ?", batch_id, owner)
        return self._batch(rows[0]) if rows else None

    def status(self, batch_id: str) -> str | None:
        """The batch's status alone (no line counts: the runner asks it every line)."""
        rows = self._rows("SELECT status FROM batches WHERE id = ?", batch_id)
        return rows[0][0] if rows else None

    def batches(self, owner: str) -> list[BatchRow]:
        rows = self._rows(
            "SELECT * FROM batches WHERE owner = ? ORDER BY created_at DESC, id", owner
        )
        return [self._batch(r) for r in rows]

    def unfinished(self) -> list[str]:
        marks = ", ".join("?" * len(UNFINISHED))
        sql = f"SELECT id FROM batches WHERE status IN ({marks}) ORDER BY created_at, id"
        return [r[0] for r in self._rows(sql, *UNFINISHED)]

    def set_status(self, batch_id: str, status: str, **fields: Any) -> None:
        """The new status, its time, and any of: errors, total, output_file_id, error_file_id."""
        b = self.batch(batch_id)
        assert b is not None
        times = {**b.times, status: b.times.get(status, int(time.time()))}
        sets, args = ["status = ?", "times = ?"], [status, json.dumps(times)]
        for name, value in fields.items():
            sets.append(f"{name} = ?")
            args.append(json.dumps(value) if name == "errors" else value)
        self._exec(f"UPDATE batches SET {', '.join(sets)} WHERE id = ?", *args, batch_id)

    def cancel(self, batch_id: str) -> None:
        """cancelling, where the batch has not ended (the runner then stops it)."""
        marks = ", ".join("?" * len(UNFINISHED))
        rows = self._rows(
            f"SELECT status FROM batches WHERE id = ? AND status IN ({marks})",
            batch_id,
            *UNFINISHED,
        )
        if rows and rows[0][0] != "cancelling":
            self.set_status(batch_id, "cancelling")

    # ------------------------------------------------------------------ lines

    def record(self, batch_id: str, idx: int, ok: bool, result: dict[str, Any]) -> None:
        """A line's answer; a second answer for the same line is dropped (exactly once)."""
        self._exec(
            "INSERT OR IGNORE INTO lines VALUES (?, ?, ?, ?)",
            batch_id, idx, int(ok), json.dumps(result, separators=(",", ":")),
        )  # fmt: skip

    def done(self, batch_id: str) -> set[int]:
        return {r[0] for r in self._rows("SELECT idx FROM lines WHERE batch_id = ?", batch_id)}

    def results(self, batch_id: str, ok: bool) -> Iterator[str]:
        rows = self._rows(
            "SELECT result FROM lines WHERE batch_id = ? AND ok = ? ORDER BY idx", batch_id, int(ok)
        )
        return (r[0] for r in rows)
