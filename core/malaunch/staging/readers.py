"""Reading one source file into an open local file: through any fsspec filesystem, or for
S3 and OBS with one streamed GET per object on s3fs's event loop.

For S3 and OBS, ``fs.get_file`` would do too, but this reads the body in 1 MiB pieces rather
than 64 KiB (less work per byte on the loop, which is what bounds a stage-in on a small
machine: ``benchmarks/bench_staging.py``), needs no HEAD, and returns the ETag of the GET:
a file that changed since it was listed is recorded as it was read, at no extra request.

A reader writes the file to ``out``, calls ``count`` with each piece's length, and returns
what it saw: the size the file should now have and its ETag, when known. The fsspec reader,
which may read in several pieces, reads one byte past the listed size, so that a file that
grew is caught by the size check, and compares the ETag (or mtime) after several pieces.
"""

from __future__ import annotations

import errno
from typing import Any, BinaryIO, Callable, Dict

CHUNK = 8 * 2**20  # an fsspec read asks for this much at a time
STREAM = 1 << 20  # an S3 body is read this much at a time

Seen = Dict[str, Any]  # what the read saw: "size" it should have got, "etag"
Reader = Callable[[str, Dict[str, Any], BinaryIO, Callable[[int], None]], Seen]


def fsspec_reader(fs: Any) -> Reader:
    """Read through any fsspec filesystem, ``CHUNK`` bytes per call (ranged GETs on S3)."""

    def read(path: str, entry: Seen, out: BinaryIO, count: Callable[[int], None]) -> Seen:
        size = int(entry["size"])
        for start in range(0, size, CHUNK):
            end = start + CHUNK if start + CHUNK < size else size + 1
            data = fs.cat_file(path, start=start, end=end)
            out.write(data)
            count(len(data))
        if size > CHUNK:  # several reads: they must all have read the version listed
            info = fs.info(path)
            now = str(info.get("ETag") or info.get("etag") or "")
            if not now or "etag" not in entry:
                now = str(info.get("mtime") or info.get("LastModified") or "")
            if now != entry.get("etag", entry.get("mtime")):
                raise OSError(errno.EIO, "changed while it was read")
        return {"size": size}

    return read


def s3fs_reader(fs: Any) -> Reader:
    """Read S3 and OBS objects with one streamed GET each, on s3fs's event loop."""
    from fsspec.asyn import sync  # noqa: PLC0415 (fsspec is imported when a URL is opened)

    def read(path: str, entry: Seen, out: BinaryIO, count: Callable[[int], None]) -> Seen:
        return dict(sync(fs.loop, _get_object, fs, path, entry, out, count))

    return read


async def _get_object(
    fs: Any, path: str, entry: Seen, out: BinaryIO, count: Callable[[int], None]
) -> Seen:
    bucket, key, _ = fs.split_path(path)
    response = await fs._call_s3("get_object", Bucket=bucket, Key=key)
    body = response["Body"]
    try:
        while True:
            data = await body.read(STREAM)
            if not data:
                break
            out.write(data)
            count(len(data))
    finally:
        body.close()
    seen: Seen = {"size": int(response.get("ContentLength", entry["size"]))}
    if response.get("ETag"):
        seen["etag"] = str(response["ETag"])
    return seen


def size_error(got: int, size: int) -> OSError:
    return OSError(errno.EIO, f"got {got} bytes, the listing said {size}: changed meanwhile?")
