"""A ``multipart/form-data`` upload read as it arrives: the file part written to disk chunk
by chunk (never held whole: a batch file may be 200 MB), the small fields kept. Only what
OpenAI's ``POST /v1/files`` sends: one file part (``file``) and text fields (``purpose``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesHeaderParser
from email.policy import HTTP
from pathlib import Path

from pyllama.server.http.errors import APIError

__all__ = ["Uploaded", "receive_upload"]

MAX_FIELD = 64 << 10  # a text field (purpose, expires_after ...)
MAX_HEAD = 16 << 10  # a part's headers


@dataclass
class Uploaded:
    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None  # the file part's name; None: no file part
    bytes: int = 0


def _boundary(content_type: str) -> bytes:
    msg = Message()
    msg["content-type"] = content_type
    boundary = msg.get_param("boundary")
    if msg.get_content_type() != "multipart/form-data" or not isinstance(boundary, str):
        raise APIError(400, "expected a multipart/form-data body with a boundary")
    return boundary.encode("latin-1")


def _part_head(raw: bytes) -> tuple[str, str | None]:
    head = BytesHeaderParser(policy=HTTP).parsebytes(raw + b"\r\n\r\n")
    name = head.get_param("name", header="content-disposition")
    if not isinstance(name, str):
        raise APIError(400, "a form part has no name")
    filename = head.get_param("filename", header="content-disposition")
    return name, filename if isinstance(filename, str) else None


async def receive_upload(
    chunks: AsyncIterator[bytes], content_type: str, dest: Path, max_bytes: int
) -> Uploaded:
    """The form's fields, its file part written to ``dest``. 400 for a body that is not a
    form; 413 for a file over ``max_bytes`` (what was written is left for the caller)."""
    delim = b"\r\n--" + _boundary(content_type)
    out = Uploaded()
    buf = b"\r\n"  # the first delimiter has no CRLF before it
    state = "preamble"
    name, filename = "", None
    value = bytearray()
    with open(dest, "wb") as f:

        def take(data: bytes) -> None:
            if filename is not None:
                out.bytes += len(data)
                if out.bytes > max_bytes:
                    raise APIError(413, f"the file exceeds the upload limit of {max_bytes} bytes")
                f.write(data)
            else:
                value.extend(data)
                if len(value) > MAX_FIELD:
                    raise APIError(400, f"the form field '{name}' is too long")

        async for chunk in chunks:
            buf += chunk
            while True:
                if state == "preamble" or state == "body":
                    at = buf.find(delim)
                    if at < 0:
                        keep = len(delim) + 1
                        if state == "body" and len(buf) > keep:
                            take(buf[:-keep])
                            buf = buf[-keep:]
                        break
                    if state == "body":
                        take(buf[:at])
                        if filename is None:
                            out.fields[name] = value.decode("utf-8", errors="replace")
                    buf = buf[at + len(delim) :]
                    state = "after"
                if state == "after":
                    if len(buf) < 2:
                        break
                    if buf[:2] == b"--":
                        state = "end"
                        break
                    if buf[:2] != b"\r\n":
                        raise APIError(400, "the multipart/form-data body is malformed")
                    buf, state = buf[2:], "head"
                if state == "head":
                    at = buf.find(b"\r\n\r\n")
                    if at < 0:
                        if len(buf) > MAX_HEAD:
                            raise APIError(400, "a form part's headers are too long")
                        break
                    name, part_file = _part_head(buf[:at])
                    if part_file is not None:
                        if out.filename is not None:
                            raise APIError(400, "the form holds more than one file")
                        out.filename = part_file or "upload.jsonl"
                    filename = part_file
                    value = bytearray()
                    buf, state = buf[at + 4 :], "body"
                    continue
                if state == "end":
                    break
            if state == "end":
                break
    if state != "end":
        raise APIError(400, "the multipart/form-data body is malformed (it ends early)")
    return out
