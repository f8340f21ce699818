"""Reading one source file into an open local file: through any fsspec filesystem, or for
S3 and OBS with one streamed GET per object on s3fs's event loop.

For S3 and OBS, ``fs.get_file`` would do too, but this reads the body in 1 MiB pieces rather
than 64 KiB (less work per byte on the loop, which is what bounds a stage-in on a small
machine: ``benchmarks/bench_staging.py``), needs no HEAD, and returns the ETag of the GET:
a file that changed since it was listed is recorded as it was read, at no extra request.
An object of :data:`BIG` bytes or more is read in ranges, several at a time (one connection
is slow on a long path), each with ``If-Match`` on the listed ETag so that a change in the
middle fails the read (and it is retried) rather than mixing two versions.

A reader writes the file to ``out``, calls ``count`` with each piece's length, and returns
what it saw: the size the file should now have and its ETag, when known. The fsspec reader,
which may read in several pieces, reads one byte past the listed size, so that a file that
grew is caught by the size check, and compares the ETag (or mtime) after several pieces; a
file listed without a size (HTTP without Content-Length) is read to its end, never taken for
an empty one.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from typing import Any, Callable, ContextManager, Dict

from malaunch.staging.localfs import Sink, local

CHUNK = 8 * 2**20  # an fsspec read asks for this much at a time
STREAM = 1 << 20  # an S3 body is read this much at a time
BIG = 64 * 2**20  # an S3 object this large is read in ranges, several at a time
PART = 16 * 2**20
PARTS = 8

Seen = Dict[str, Any]  # what the read saw: "size" it should have got, "etag"
Reader = Callable[[str, Dict[str, Any], Sink, Callable[[int], None]], Seen]


def fsspec_reader(fs: Any, local_source: bool = False) -> Reader:
    """Read through any fsspec filesystem, ``CHUNK`` bytes per call (ranged GETs on S3).

    ``local_source``: ``fs`` is this machine's (``file://``), whose errors are a local
    source's (:mod:`malaunch.staging.localfs`).
    """

    def source(path: str) -> ContextManager[None]:
        if local_source:
            return local(path, reading=True, direction="in")
        return contextlib.nullcontext()

    def read(path: str, entry: Seen, out: Sink, count: Callable[[int], None]) -> Seen:
        if entry["size"] is None:  # the listing gave no size: read to the end
            with source(path):
                return {"size": _read_to_end(fs, path, out, count)}
        size = int(entry["size"])
        for start in range(0, size, CHUNK):
            end = start + CHUNK if start + CHUNK < size else size + 1
            with source(path):
                data = fs.cat_file(path, start=start, end=end)
            out.write(data)
            count(len(data))
        if size > CHUNK:  # several reads: they must all have read the version listed
            with source(path):
                info = fs.info(path)
            now = str(info.get("ETag") or info.get("etag") or "")
            if not now or "etag" not in entry:
                now = str(info.get("mtime") or info.get("LastModified") or "")
            if now != entry.get("etag", entry.get("mtime")):
                raise OSError(errno.EIO, "changed while it was read")
        return {"size": size}

    return read


def _read_to_end(fs: Any, path: str, out: Sink, count: Callable[[int], None]) -> int:
    """A file whose size the listing did not give (an HTTP server that sends no
    Content-Length), in ``CHUNK`` pieces until the end; the bytes read."""
    total = 0
    with fs.open(path, "rb") as handle:
        while True:
            data = handle.read(CHUNK)
            if not data:
                return total
            out.write(data)
            count(len(data))
            total += len(data)


def s3fs_reader(fs: Any) -> Reader:
    """Read S3 and OBS objects with one streamed GET each, on s3fs's event loop."""
    from fsspec.asyn import sync  # noqa: PLC0415 (fsspec is imported when a URL is opened)

    def read(path: str, entry: Seen, out: Sink, count: Callable[[int], None]) -> Seen:
        if int(entry["size"] or 0) >= BIG and entry.get("etag"):
            return dict(sync(fs.loop, _get_parts, fs, path, entry, out, count))
        return dict(sync(fs.loop, _get_object, fs, path, entry, out, count))

    return read


async def _get_object(
    fs: Any, path: str, entry: Seen, out: Sink, count: Callable[[int], None]
) -> Seen:
    bucket, key, _ = fs.split_path(path)
    response = await fs._call_s3("get_object", Bucket=bucket, Key=key)
    await _stream(response["Body"], out, 0, count)
    seen: Seen = {"size": int(response.get("ContentLength", entry["size"]))}
    if response.get("ETag"):
        seen["etag"] = str(response["ETag"])
    return seen


async def _get_parts(
    fs: Any, path: str, entry: Seen, out: Sink, count: Callable[[int], None]
) -> Seen:
    """A large object in ``PART``-sized ranges, ``PARTS`` at a time, each written at its
    offset; ``If-Match`` on every range, so that all of them read the version listed."""
    bucket, key, _ = fs.split_path(path)
    size = int(entry["size"])
    out.truncate(size)
    limit = asyncio.Semaphore(PARTS)

    async def part(start: int) -> None:
        end = min(start + PART, size) - 1
        async with limit:
            response = await fs._call_s3(
                "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end}",
                IfMatch=entry["etag"],
            )  # fmt: skip
            await _stream(response["Body"], out, start, count)

    try:
        await part(0)
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # s3fs's PreconditionFailed: not the version listed
            raise
        out.truncate(0)
        return await _get_object(fs, path, entry, out, count)  # one GET: one version
    try:
        await asyncio.gather(*(part(start) for start in range(PART, size, PART)))
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise OSError(errno.EIO, "changed while it was read") from exc
        raise
    return {"size": size}


async def _stream(body: Any, out: Sink, offset: int, count: Callable[[int], None]) -> None:
    try:
        while True:
            data = await body.read(STREAM)
            if not data:
                return
            out.write_at(data, offset)
            offset += len(data)
            count(len(data))
    finally:
        body.close()


def size_error(got: int, size: int) -> OSError:
    return OSError(errno.EIO, f"got {got} bytes, the listing said {size}: changed meanwhile?")
