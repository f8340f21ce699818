"""Installed-looking plugin distributions without pip (part of ``malaunch.testing``)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional


def write_fake_distribution(
    directory: Path,
    name: str,
    version: str,
    entry_points: Mapping[str, str],
    modules: Optional[Mapping[str, str]] = None,
) -> Path:
    """Write an installed-looking distribution into ``directory`` (which must be on sys.path).

    ``entry_points`` maps entry-point names of the ``malaunch`` group to ``module[:object]``;
    ``modules`` maps module names to their source. Put ``directory`` on ``PYTHONPATH`` of a
    :func:`run_cli` call (or ``monkeypatch.syspath_prepend`` it) and the real entry-point
    machinery finds the plugin, without pip. Returns the ``.dist-info`` directory.
    """
    info = directory / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    (info / "METADATA").write_text(metadata, encoding="utf-8")
    lines = "".join(f"{ep} = {target}\n" for ep, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[malaunch]\n{lines}", encoding="utf-8")
    for module, source in (modules or {}).items():
        (directory / f"{module}.py").write_text(source, encoding="utf-8")
    return info
