"""One pass over one mapping: list both sides, skip what the manifest says is unchanged,
transfer the rest in parallel, record it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, ContextManager, Dict, List, Optional, Sequence, Tuple

from malaunch.errors import MissingInputError
from malaunch.files import kind_of
from malaunch.log import logger
from malaunch.staging.errors import MappingFileError
from malaunch.staging.localfs import PARTIAL, local, local_error, special
from malaunch.staging.manifest import (
    Entry,
    Manifest,
    exclusive,
    legacy_path,
    local_state,
    manifest_path,
    manifest_place,
    own_file,
)
from malaunch.staging.models import MappingReport
from malaunch.staging.pool import Run, Target, run_all
from malaunch.staging.progress import Progress, human
from malaunch.staging.remote import missing_credentials, scheme_of
from malaunch.staging.transfer import (
    Cancelled,
    download,
    no_credentials,
    remove_unfinished,
    retrying,
    upload,
)
from malaunch.wording import plural


def stage_in(target: Target, run: Run) -> MappingReport:
    """Bring ``target``'s URL to its LOCAL; files unchanged since the last time stay."""
    started = run.clock()
    kind = special(target.local)
    if kind is not None:  # --stage-in /dev/null=...: never replaced, never opened
        run.skips.skip(target.local, kind, "in")
        return _report(target, run, started, None, skipped=0)
    listing, single = list_source(target, run)
    if listing is None:
        return _report(target, run, started, None, skipped=0)  # FIFOs and devices only
    dest = target.local / Path(target.root).name if single and _is_dir(target) else target.local
    try:
        # Every OSError here is the destination's: the listing is done, and a transfer's
        # errors are classified by the time they leave run_all.
        with local(dest, reading=False, direction="in"):
            (dest.parent if single else dest).mkdir(parents=True, exist_ok=True)
            manifest_file = manifest_place(dest, "in", not single)
            with exclusive(manifest_file.with_suffix(".lock"), str(target.mapping), run.abort):
                legacy = legacy_path(dest, "in", not single)
                manifest = Manifest(manifest_file, target.mapping.url, legacy=legacy)
                _remove_partials(dest, single)
                todo, fresh = _todo(manifest, listing, dest, run)
                progress = _progress("stage-in", target, run, todo)

                def fetch(item: Tuple[str, Entry]) -> None:
                    name, entry = item
                    path = dest / name if name else dest
                    seen = download(
                        target.reader, _remote(target, name), path, entry=entry,
                        progress=progress, url=_url(target, name), **run.retry_kw(),
                    )  # fmt: skip
                    manifest.put(name, {**seen, **(local_state(path) or {})})
                    progress.file_done()

                try:
                    try:
                        run_all(run, todo, fetch, progress)
                    finally:
                        if run.abort.is_set():  # transfers left stuck: their files go
                            remove_unfinished()
                except BaseException:
                    # what was fetched is kept for next time; the transfer's error is the one
                    # to tell, not the manifest's (a full disk fails both)
                    with contextlib.suppress(OSError):
                        _close(manifest, listing, dest, single)
                    raise
                removed = _close(manifest, listing, dest, single)
    except InterruptedError as exc:
        raise Cancelled(str(exc)) from exc
    return _report(target, run, started, progress, skipped=fresh, removed=removed)


def _remove_partials(dest: Path, single: bool) -> None:
    """The temporary files of downloads an earlier launcher left half-done (killed mid-file,
    or gone while a transfer hung): under the mapping's lock no other stager writes them."""
    folders: List[Tuple[str, List[str], List[str]]]
    if single:
        folders = [(str(dest.parent), [], _names(dest.parent, f".{dest.name}."))]
    else:
        folders = list(os.walk(dest))  # links to folders are not followed: no loop, no escape
    for folder, _, names in folders:
        for name in names:
            if name.startswith(".") and name.endswith(PARTIAL):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))


def _names(folder: Path, prefix: str) -> List[str]:
    try:
        return [name for name in os.listdir(folder) if name.startswith(prefix)]
    except OSError:
        return []


def _todo(
    manifest: Manifest, listing: Dict[str, Entry], dest: Path, run: Run
) -> Tuple[List[Tuple[str, Entry]], int]:
    """The files to fetch (not up to date, and no FIFO or device in their place), and how
    many are up to date."""
    todo, fresh = [], 0
    for name, entry in listing.items():
        path = dest / name if name else dest
        kind = special(path)
        if kind is not None:
            run.skips.skip(path, kind, "in")
            manifest.drop(name)
        elif _fresh(manifest, name, entry, dest):
            fresh += 1
        else:
            todo.append((name, entry))
    return todo, fresh


def list_source(target: Target, run: Run) -> Tuple[Optional[Dict[str, Entry]], bool]:
    """{relative name: size and ETag or mtime} of the URL's files; whether it is one file.
    ``None`` when it holds nothing but FIFOs, sockets and devices (each said, and skipped).

    :raises MissingInputError: no such bucket, object or prefix; no credentials (66); a
        ``file://`` source that cannot be read.
    :raises MappingFileError: a key that cannot be a path under LOCAL (65).
    """
    url = target.mapping.url

    def find() -> Dict[str, Dict[str, Any]]:
        with _reading(target):
            return dict(target.fs.find(target.root, detail=True, withdirs=False))

    try:
        found = retrying(find, url, **run.retry_kw())
    except Exception as exc:
        if no_credentials(exc.__cause__ or exc):
            raise MissingInputError(f"{url}: {missing_credentials(scheme_of(url))}") from exc
        raise
    entries: Dict[str, Entry] = {}
    specials = 0
    for name, info in found.items():
        if info.get("type") == "directory" or name.endswith("/"):
            continue
        relative = "" if name == target.root else name[len(target.root) + 1 :]
        if not name.startswith(target.root) or any(map(own_file, relative.split("/"))):
            continue
        if info.get("type") not in (None, "file"):  # file://'s FIFOs, sockets and devices
            kind = kind_of(int(info.get("mode") or 0))
            run.skips.skip(name, kind, "in")
            specials += 1
            continue
        _check_name(url, relative)
        entries[relative] = _entry(info)
    if not entries and specials:
        return None, False
    if not entries and not _empty_dir(target):
        raise MissingInputError(f"{url}: no such bucket, object or prefix")
    return entries, list(entries) == [""]


def _reading(target: Target) -> ContextManager[None]:
    """Where a ``file://`` source is read, its errors are a local source's."""
    if target.local_url:
        return local(target.root, reading=True, direction="in")
    return contextlib.nullcontext()


def _entry(info: Dict[str, Any]) -> Entry:
    # No size (an HTTP server without Content-Length) is "unknown", not 0: read to the end.
    size = info.get("size")
    entry: Entry = {"size": None if size is None else int(size)}
    etag = info.get("ETag") or info.get("etag")
    if etag:
        entry["etag"] = str(etag)
    else:
        entry["mtime"] = str(info.get("mtime") or info.get("LastModified") or "")
    return entry


def _check_name(url: str, relative: str) -> None:
    parts = relative.split("/")
    if relative and any(part in ("", ".", "..") for part in parts):
        msg = f"{url}/{relative}: a key that is no path under LOCAL ('', '.' or '..' in it)"
        raise MappingFileError(msg)


def _empty_dir(target: Target) -> bool:
    """An existing empty directory (not on S3, where an empty prefix does not exist)."""
    if target.atomic_put:
        return False
    with contextlib.suppress(Exception):
        return bool(target.fs.isdir(target.root))
    return False


def _is_dir(target: Target) -> bool:
    return target.mapping.local.endswith("/") or target.local.is_dir()


def _fresh(manifest: Manifest, name: str, entry: Entry, local: Path) -> bool:
    old = manifest.get(name)
    if entry["size"] is None:  # a source that cannot say its size cannot say it is unchanged
        return False
    if old is None or any(old.get(key) != value for key, value in entry.items()):
        return False
    state = local_state(local / name if name else local)
    return state is not None and all(old.get(key) == value for key, value in state.items())


def _close(manifest: Manifest, listing: Dict[str, Entry], dest: Path, single: bool) -> int:
    """The end of a stage-in: stale copies removed (how many), the manifest saved."""
    removed = 0 if single else _remove_stale(manifest, listing, dest)
    manifest.save()
    return removed


def _remove_stale(manifest: Manifest, listing: Dict[str, Entry], local: Path) -> int:
    """Delete the files an earlier stage-in put here that the source no longer has, unless
    they were changed here since."""
    removed = 0
    for name, old in list(manifest.entries.items()):
        if name in listing:
            continue
        path = local / name
        state = local_state(path)
        if state is not None and all(old.get(key) == value for key, value in state.items()):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
        manifest.drop(name)
    return removed


def stage_out(target: Target, run: Run) -> MappingReport:
    """Upload what changed in ``target``'s LOCAL since the last pass."""
    started = run.clock()
    source = target.local
    if not source.exists():
        logger.debug(f"stage-out {target.mapping}: {source} does not exist (yet)")
        return _report(target, run, started, None, skipped=0)
    kind = special(source)
    if kind is not None:  # a FIFO would block the upload's open until a writer comes
        run.skips.skip(source, kind, "out")
        return _report(target, run, started, None, skipped=0)
    single = not source.is_dir()
    name = source.name if target.mapping.url.endswith("/") else ""  # into the prefix
    unreadable: List[str] = []
    files = {name: source} if single else _walk(source, run, unreadable)
    legacy = legacy_path(source, "out", not single)
    try:
        manifest_file = manifest_place(source, "out", not single)
    except OSError:  # nowhere to keep it (read-only): every pass uploads everything
        manifest_file = manifest_path(source, "out")
    manifest = Manifest(manifest_file, target.mapping.url, legacy=legacy)
    todo = [(n, p, local_state(p)) for n, p in files.items() if not _fresh_out(manifest, n, p)]
    progress = _progress("stage-out", target, run, [(n, {"size": _size(s)}) for n, _, s in todo])

    def send(item: Tuple[str, Path, Any]) -> None:
        name, path, before = item
        kind = special(path)
        if kind is not None:  # became one since the walk
            run.skips.skip(path, kind, "out")
            return
        try:
            upload(
                target.fs, path, _remote(target, name), atomic=target.atomic_put,
                progress=progress, url=_url(target, name), local_destination=target.local_url,
                **run.retry_kw(),
            )  # fmt: skip
        except MissingInputError:
            if path.exists():
                raise
            return  # deleted while we were at it (a rotated checkpoint): nothing to upload
        if local_state(path) == before:  # changed meanwhile: the next pass uploads it again
            manifest.put(name, before)
        progress.file_done()

    errors = unreadable + run_all(run, todo, send, progress)
    with contextlib.suppress(OSError):  # read-only: every pass uploads everything
        manifest.save()
    skipped = len(files) - len(todo)
    return _report(target, run, started, progress, skipped=skipped, errors=errors)


def _walk(top: Path, run: Run, unreadable: List[str]) -> Dict[str, Path]:
    """The regular files under ``top``; FIFOs, sockets and devices said and left out, and the
    folders that cannot be read added to ``unreadable`` (and ``run.failures``)."""

    def failed(exc: OSError) -> None:
        error = local_error(exc, top, reading=True, direction="out")
        run.failures.append(error)
        unreadable.append(str(error))

    found = {}
    for folder, dirs, names in os.walk(top, onerror=failed):
        dirs[:] = sorted(d for d in dirs if not own_file(d))
        for name in sorted(names):
            path = Path(folder) / name
            if own_file(name):
                continue
            if path.is_file():
                found[path.relative_to(top).as_posix()] = path
            else:
                kind = special(path)
                if kind is not None:
                    run.skips.skip(path, kind, "out")
    return found


def _fresh_out(manifest: Manifest, name: str, path: Path) -> bool:
    old = manifest.get(name)
    return old is not None and old == local_state(path)


def _size(state: Any) -> int:
    return int(state["local_size"]) if state else 0


def _remote(target: Target, name: str) -> str:
    return f"{target.root}/{name}" if name else target.root


def _url(target: Target, name: str) -> str:
    return f"{target.mapping.url.rstrip('/')}/{name}" if name else target.mapping.url


def _progress(kind: str, target: Target, run: Run, todo: List[Tuple[str, Entry]]) -> Progress:
    total = sum(int(entry["size"] or 0) for _, entry in todo)
    return Progress(f"{kind} {target.mapping}", total, len(todo), stream=run.stream)


def _report(
    target: Target,
    run: Run,
    started: float,
    progress: Any,
    *,
    skipped: int,
    removed: int = 0,
    errors: Sequence[str] = (),
) -> MappingReport:
    seconds = run.clock() - started
    files = progress.done_files if progress else 0
    size = progress.done_bytes if progress else 0
    if files or errors or removed:
        rate = f", {human(size / seconds)}/s" if seconds > 0 else ""
        logger.info(
            f"stage-{target.mapping.direction} {target.mapping}: "
            f"{plural(files, 'file')}, {human(size)} in {seconds:.1f}s{rate}; "
            f"{skipped} unchanged"
        )
    return MappingReport(
        local=target.mapping.local, url=target.mapping.url, direction=target.mapping.direction,
        files=files, bytes=size, skipped=skipped, removed=removed, seconds=round(seconds, 3),
        errors=tuple(errors),
    )  # fmt: skip
