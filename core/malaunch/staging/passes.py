"""One pass over one mapping: list both sides, skip what the manifest says is unchanged,
transfer the rest in parallel, record it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from malaunch.errors import MissingInputError
from malaunch.log import logger
from malaunch.staging.errors import MappingFileError
from malaunch.staging.manifest import (
    Entry,
    Manifest,
    exclusive,
    local_state,
    manifest_path,
    own_file,
)
from malaunch.staging.models import MappingReport
from malaunch.staging.pool import Run, Target, run_all
from malaunch.staging.progress import Progress, human
from malaunch.staging.remote import missing_credentials, scheme_of
from malaunch.staging.transfer import Cancelled, download, no_credentials, retrying, upload


def stage_in(target: Target, run: Run) -> MappingReport:
    """Bring ``target``'s URL to its LOCAL; files unchanged since the last time stay."""
    started = run.clock()
    listing, single = list_source(target, run)
    local = target.local / Path(target.root).name if single and _is_dir(target) else target.local
    manifest_file = manifest_path(local, "in", not single)
    lock_file = manifest_file.with_suffix(".lock")
    try:
        with exclusive(lock_file, str(target.mapping), run.abort):
            manifest = Manifest(manifest_file, target.mapping.url)
            todo = [
                (name, e) for name, e in listing.items() if not _fresh(manifest, name, e, local)
            ]
            progress = _progress("stage-in", target, run, todo)

            def fetch(item: Tuple[str, Entry]) -> None:
                name, entry = item
                path = local / name if name else local
                seen = download(
                    target.reader, _remote(target, name), path, entry=entry,
                    progress=progress, url=_url(target, name), **run.retry_kw(),
                )  # fmt: skip
                manifest.put(name, {**seen, **(local_state(path) or {})})
                progress.file_done()

            try:
                run_all(run, todo, fetch, progress)
            finally:
                removed = _remove_stale(manifest, listing, local) if not single else 0
                manifest.save()
    except InterruptedError as exc:
        raise Cancelled(str(exc)) from exc
    skipped = len(listing) - len(todo)
    return _report(target, run, started, progress, skipped=skipped, removed=removed)


def list_source(target: Target, run: Run) -> Tuple[Dict[str, Entry], bool]:
    """{relative name: size and ETag or mtime} of the URL's files; whether it is one file.

    :raises MissingInputError: no such bucket, object or prefix; no credentials (66).
    :raises MappingFileError: a key that cannot be a path under LOCAL (65).
    """
    url = target.mapping.url
    try:
        found = retrying(
            lambda: target.fs.find(target.root, detail=True, withdirs=False), url,
            **run.retry_kw(),
        )  # fmt: skip
    except Exception as exc:
        if no_credentials(exc.__cause__ or exc):
            raise MissingInputError(f"{url}: {missing_credentials(scheme_of(url))}") from exc
        raise
    entries: Dict[str, Entry] = {}
    for name, info in found.items():
        if info.get("type") == "directory" or name.endswith("/"):
            continue
        relative = "" if name == target.root else name[len(target.root) + 1 :]
        if not name.startswith(target.root) or own_file(Path(relative).name):
            continue
        _check_name(url, relative)
        entries[relative] = _entry(info)
    if not entries and not _empty_dir(target):
        raise MissingInputError(f"{url}: no such bucket, object or prefix")
    return entries, list(entries) == [""]


def _entry(info: Dict[str, Any]) -> Entry:
    entry: Entry = {"size": int(info.get("size") or 0)}
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
    if old is None or any(old.get(key) != value for key, value in entry.items()):
        return False
    state = local_state(local / name if name else local)
    return state is not None and all(old.get(key) == value for key, value in state.items())


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
    single = not source.is_dir()
    name = source.name if target.mapping.url.endswith("/") else ""  # into the prefix
    files = {name: source} if single else _walk(source)
    manifest = Manifest(manifest_path(source, "out", not single), target.mapping.url)
    todo = [(n, p, local_state(p)) for n, p in files.items() if not _fresh_out(manifest, n, p)]
    progress = _progress("stage-out", target, run, [(n, {"size": _size(s)}) for n, _, s in todo])

    def send(item: Tuple[str, Path, Any]) -> None:
        name, path, before = item
        url = _url(target, name)
        try:
            upload(
                target.fs, path, _remote(target, name), atomic=target.atomic_put,
                progress=progress, url=url, **run.retry_kw(),
            )  # fmt: skip
        except MissingInputError:
            if path.exists():
                raise
            return  # deleted while we were at it (a rotated checkpoint): nothing to upload
        if local_state(path) == before:  # changed meanwhile: the next pass uploads it again
            manifest.put(name, before)
        progress.file_done()

    errors = run_all(run, todo, send, progress)
    with contextlib.suppress(OSError):  # a read-only LOCAL: every pass uploads everything
        manifest.save()
    skipped = len(files) - len(todo)
    return _report(target, run, started, progress, skipped=skipped, errors=errors)


def _walk(top: Path) -> Dict[str, Path]:
    found = {}
    for folder, dirs, names in os.walk(top):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if not own_file(name) and path.is_file():
                found[path.relative_to(top).as_posix()] = path
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
    total = sum(int(entry["size"]) for _, entry in todo)
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
    count = progress.done_bytes if progress else 0
    if files or errors or removed:
        rate = f", {human(count / seconds)}/s" if seconds > 0 else ""
        logger.info(
            f"stage-{target.mapping.direction} {target.mapping}: "
            f"{files} files, {human(count)} in {seconds:.1f}s{rate}; {skipped} unchanged"
        )
    return MappingReport(
        local=target.mapping.local, url=target.mapping.url, direction=target.mapping.direction,
        files=files, bytes=count, skipped=skipped, removed=removed, seconds=round(seconds, 3),
        errors=tuple(errors),
    )  # fmt: skip
