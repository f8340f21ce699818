"""``--path-mapping FILE``: X2MindSpore's ``path_mapping_config.py``, or the same tables in
JSON or TOML.

X2MindSpore (``x2ms_adapter/modelarts/path_mapping_config.py``) writes::

    PATH_MAPPING_CONFIG = {
        'input': {'/data/dataset/imagenet': 'obs://dataset/imagenet'},
        'output': {'./checkpoints': 'obs://outputs/'},
    }

The Python file is parsed with :mod:`ast` and never executed: the one top-level assignment of
a dict literal to ``PATH_MAPPING_CONFIG`` is read, node by node, and must hold nothing but
string keys and string values; other statements are ignored, and anything else that touches
``PATH_MAPPING_CONFIG`` is refused, naming the file and the line. JSON and TOML files hold
the two tables at the top level (``{"input": {...}, "output": {...}}``).
"""

from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Tuple, Union

from malaunch.errors import MissingInputError, UsageError
from malaunch.files import read_regular
from malaunch.jsontext import JsonLongInteger, JsonTooDeep, loads
from malaunch.staging.errors import MappingFileError
from malaunch.staging.models import StageMapping
from malaunch.staging.parse import check_mapping

NAME = "PATH_MAPPING_CONFIG"
TABLES = {"input": "in", "output": "out"}
MAX_BYTES = 1 << 20
Tables = Dict[str, Dict[str, str]]


def read_path_mapping(path: Union[str, Path]) -> List[StageMapping]:
    """The mappings of a ``.py``, ``.json`` or ``.toml`` path-mapping file, inputs first.

    :raises MissingInputError: the file does not exist or cannot be read (66).
    :raises MappingFileError: it is malformed, naming the file and the line (65).
    :raises UsageError: another extension, or TOML without a TOML reader (64).
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".py", ".json", ".toml"):
        msg = f"--path-mapping {file}: expected a .py, .json or .toml file"
        raise UsageError(msg)
    text = _read(file)
    if suffix == ".py":
        tables = _from_python(file, text)
    elif suffix == ".json":
        tables = _from_json(file, text)
    else:
        tables = _check_tables(file, _load_toml(file, text))
    mappings = []
    for table, direction in TABLES.items():
        for local, url in tables.get(table, {}).items():
            mapping = StageMapping(local=local, url=url, direction=direction)
            check_mapping(mapping, f"{file}: {table}[{local!r}]", MappingFileError)
            mappings.append(mapping)
    return mappings


def _read(file: Path) -> str:
    try:
        data = read_regular(file, MAX_BYTES)
    except (FileNotFoundError, PermissionError) as exc:
        msg = f"--path-mapping {file}: {exc.strerror or exc}"
        raise MissingInputError(msg) from exc
    except OSError as exc:
        msg = f"--path-mapping {file}: {exc.strerror or exc}"
        raise MappingFileError(msg) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise MappingFileError(msg) from exc


def _fail(file: Path, node: Union[ast.AST, None], what: str) -> NoReturn:
    where = f"{file}:{getattr(node, 'lineno', 0)}" if node is not None else str(file)
    msg = f"{where}: {what}"
    raise MappingFileError(msg)


def _from_python(file: Path, text: str) -> Tables:
    try:
        module = ast.parse(text, filename=str(file))
    except SyntaxError as exc:  # also too many nested parentheses, a too-long integer
        where = f"{file}:{exc.lineno}" if exc.lineno else str(file)
        # Python's own words for a too-long integer advise sys.set_int_max_str_digits(): of
        # no use to someone writing a mapping file; the first sentence says what is wrong.
        what = exc.msg.split(";")[0] if "set_int_max_str_digits" in exc.msg else exc.msg
        msg = f"{where}: not Python: {what}"
        raise MappingFileError(msg) from exc
    except (RecursionError, MemoryError, ValueError) as exc:
        # The parser's other ways to give up: an expression nested past its stack, such as a
        # long chain of unary minuses or of + (MemoryError, RecursionError), or a NUL byte
        # (ValueError before Python 3.11): the file is malformed, not the launcher broken.
        what = str(exc) if isinstance(exc, ValueError) else "nested too deeply to read"
        msg = f"{file}: not Python: {what}"
        raise MappingFileError(msg) from exc
    found: Union[ast.expr, None] = None
    for statement in module.body:
        value, touches = _assignment(statement)
        if not touches:
            continue
        if value is None or found is not None:
            _fail(file, statement, f"{NAME} must be assigned once, to a dict literal")
        found = value
    if found is None:
        _fail(file, None, f"no assignment of a dict literal to {NAME}")
    return _tables_of(file, found)


def _assignment(statement: ast.stmt) -> Tuple[Union[ast.expr, None], bool]:
    """(the value if the statement is ``NAME = value``, whether it mentions NAME at all)."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Name) and target.id == NAME:
            return statement.value, True
    annotated = isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    if annotated and statement.target.id == NAME:  # type: ignore[attr-defined]
        return statement.value, True  # type: ignore[attr-defined]
    mentions = any(isinstance(n, ast.Name) and n.id == NAME for n in ast.walk(statement))
    return None, mentions


def _tables_of(file: Path, node: ast.expr) -> Tables:
    outer = _strings_dict(file, node, nested=True)
    tables: Tables = {}
    for key, (key_node, value) in outer.items():
        if key not in TABLES:
            _fail(file, key_node, f"{NAME}: unknown table {key!r}: expected 'input' or 'output'")
        inner = _strings_dict(file, value, nested=False)
        tables[key] = {k: _string(file, v) for k, (_, v) in inner.items()}
    return tables


def _strings_dict(file: Path, node: ast.expr, nested: bool) -> Dict[str, Tuple[ast.AST, Any]]:
    what = "a dict of tables" if nested else "a dict of LOCAL: URL strings"
    if not isinstance(node, ast.Dict):
        _fail(file, node, f"{NAME}: expected {what}, not Python code")
    out: Dict[str, Tuple[ast.AST, Any]] = {}
    for key, value in zip(node.keys, node.values):
        if key is None:
            _fail(file, value, f"{NAME}: ** unpacking is not read")
        name = _string(file, key)
        if name in out:
            _fail(file, key, f"{NAME}: duplicate key {name!r}")
        out[name] = (key, value)
    return out


def _string(file: Path, node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return _fail(file, node, f"{NAME}: expected a string literal, not Python code")


def _from_json(file: Path, text: str) -> Tables:
    def pairs(items: List[Tuple[str, Any]]) -> Dict[str, Any]:
        document = dict(items)
        if len(document) < len(items):  # counted once, not key by key: 60,000 keys stay fast
            counts = Counter(key for key, _ in items)
            duplicate = next(key for key, _ in items if counts[key] > 1)
            _fail(file, None, f"duplicate key {duplicate!r}")
        return document

    try:
        document = loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        msg = f"{file}:{exc.lineno}: not JSON: {exc.msg}"
        raise MappingFileError(msg) from exc
    except JsonTooDeep as exc:
        msg = f"{file}: not JSON: {exc}"
        raise MappingFileError(msg) from exc
    except JsonLongInteger as exc:
        msg = f"{file}: {exc}"
        raise MappingFileError(msg) from exc
    return _check_tables(file, document)


def _load_toml(file: Path, text: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415 (only a TOML path-mapping file needs it)
    else:  # pragma: no cover - Python 3.9 and 3.10
        try:
            import tomli as tomllib  # type: ignore[import-not-found]  # noqa: PLC0415 (optional: the TOML reader before 3.11)
        except ImportError as exc:
            msg = f"--path-mapping {file}: reading TOML on Python < 3.11 needs tomli "
            msg += "(pip install tomli), or write the file as .json or .py"
            raise UsageError(msg) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{file}: not TOML: {exc}"
        raise MappingFileError(msg) from exc
    except RecursionError as exc:  # tomllib parses arrays and inline tables recursively
        msg = f"{file}: not TOML: nested too deeply to read"
        raise MappingFileError(msg) from exc
    except ValueError as exc:  # int() past Python's digit limit: not a TOMLDecodeError
        msg = f"{file}: not TOML: an integer too long to read"
        raise MappingFileError(msg) from exc


def _check_tables(file: Path, document: Any) -> Tables:
    if not isinstance(document, dict):
        _fail(file, None, 'expected {"input": {LOCAL: URL}, "output": {LOCAL: URL}}')
    for key, table in document.items():
        if key not in TABLES:
            _fail(file, None, f"unknown table {key!r}: expected 'input' or 'output'")
        if not isinstance(table, dict):
            _fail(file, None, f"{key}: expected a table of LOCAL = URL strings")
        for local, url in table.items():
            if not isinstance(url, str):
                _fail(file, None, f"{key}[{local!r}]: expected a URL string")
    return document
