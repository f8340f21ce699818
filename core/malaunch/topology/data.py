"""Data locations the platform passes to the job (Octopus and ModelArts variables).

``DATASET``, ``DATASET_MAP`` (JSON object: dataset name -> container path; names may be
non-ASCII), ``CACHED_DATASET``, ``RESULT``, ``MODEL``. Older Octopus CCE images used
``DATASET_PATH`` (a Python list literal), ``MODEL_PATH`` and ``TMP_RESULT_PATH``; they are read
when the current names are absent.
"""

from __future__ import annotations

import ast
import json
import os
from typing import Dict, List, Mapping, Optional

from malaunch.errors import TopologyError
from malaunch.models import DataPaths
from malaunch.topology.envparse import get
from malaunch.topology.jsonvar import MAX_JSON_VARIABLE, load_json
from malaunch.wording import quoted


def parse_data_paths(env: Mapping[str, str]) -> DataPaths:
    """The data variables of ``env``; a malformed ``DATASET_MAP`` is a TopologyError."""
    dataset_map = _dataset_map(env)
    if not dataset_map and get(env, "DATASET_PATH") is not None:
        dataset_map = _legacy_dataset_path(env["DATASET_PATH"])
    return DataPaths(
        dataset=get(env, "DATASET"),
        dataset_map=dataset_map,
        cached_dataset=get(env, "CACHED_DATASET"),
        result=get(env, "RESULT") or get(env, "TMP_RESULT_PATH"),
        model=get(env, "MODEL") or get(env, "MODEL_PATH"),
    )


def _dataset_map(env: Mapping[str, str]) -> Dict[str, str]:
    raw = get(env, "DATASET_MAP")
    if raw is None:
        return {}
    loaded = load_json(env, "DATASET_MAP")
    if not isinstance(loaded, dict):
        msg = (
            f"DATASET_MAP: expected a JSON object of dataset name to path, got {_json_type(loaded)}"
        )
        raise TopologyError(msg)
    for name, path in loaded.items():
        if not isinstance(path, str) or not path.strip():
            shown = json.dumps(path, ensure_ascii=False)
            msg = (
                f"DATASET_MAP[{json.dumps(name, ensure_ascii=False)}]: expected a path, got {shown}"
            )
            raise TopologyError(msg)
    return dict(loaded)


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _legacy_dataset_path(raw: str) -> Dict[str, str]:
    """``"['/tmp/data/dataset/dataset-0']"`` -> {"dataset-0": path}, named by the last folder."""
    if len(raw) > MAX_JSON_VARIABLE:
        msg = f"DATASET_PATH is {len(raw)} characters, more than {MAX_JSON_VARIABLE}"
        raise TopologyError(msg)
    try:
        loaded = ast.literal_eval(raw.strip())
    # Besides ValueError and SyntaxError, literal_eval raises TypeError building a set or dict
    # of lists ("{[]}"), and MemoryError or RecursionError on deep expressions ("--...-1").
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        msg = f"DATASET_PATH={quoted(raw, 200, 60)}: expected a Python list literal of paths"
        raise TopologyError(msg) from exc
    paths = [loaded] if isinstance(loaded, str) else loaded
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) for p in paths):
        msg = f"DATASET_PATH={quoted(raw, 200, 60)}: expected a Python list literal of paths"
        raise TopologyError(msg)
    result: Dict[str, str] = {}
    for path in paths:
        name = os.path.basename(path.rstrip("/")) or path
        result[path if name in result else name] = path
    return result


def missing_paths(data: DataPaths) -> List[str]:
    """The data paths that do not exist on this machine (the caller warns about them)."""
    candidates: List[Optional[str]] = [
        data.dataset,
        *data.dataset_map.values(),
        data.cached_dataset,
        data.model,
        data.result,
    ]
    # A dict keeps the order and finds a repeat at once: DATASET_MAP may hold 50,000 paths.
    seen: Dict[str, None] = {}
    for path in candidates:
        if path and path not in seen and not os.path.exists(path):
            seen[path] = None
    return list(seen)
