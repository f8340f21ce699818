"""Any text in ``malaunch render``'s arguments and ``--env`` values reaches the manifest exactly:
YAML written by PyYAML that both of its loaders (pure Python and libyaml, which refuses the
JSON surrogate pairs the hand-written writer used for an emoji, as Go's reader does) read
back, and that kubernetes-validate accepts. Bytes that are not UTF-8 have no place in a
manifest: exit 64 naming the option."""

from __future__ import annotations

import contextlib
import io
from typing import Any, Dict, Iterator, List, Tuple

import kubernetes_validate  # type: ignore[import-untyped]  # ships no type information
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.cli import render
from malaunch.testing import clean_env, run_cli

LOADERS: List[Any] = [yaml.SafeLoader, yaml.CSafeLoader]
K8S_VERSION = kubernetes_validate.latest_version()
JOB = ["--nodes", "2", "--image", "registry.example/train:1", "--framework", "torch_ddp"]


def loaded(text: str) -> List[Dict[str, Any]]:
    """The documents, read alike by both loaders."""
    pure, libyaml = (list(yaml.load_all(text, Loader=loader)) for loader in LOADERS)
    assert pure == libyaml
    return pure


def templates(job: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    for replica, spec in job["spec"]["pytorchReplicaSpecs"].items():
        yield replica, spec["template"]


def commands(job: Dict[str, Any]) -> List[List[str]]:
    return [template["spec"]["containers"][0]["command"] for _, template in templates(job)]


def test_an_emoji_in_an_argument_and_an_env_value_is_written_as_itself() -> None:
    result = run_cli(["render", "pytorchjob", *JOB, "--env", "MOOD=\U0001f600",
                      "--", "python", "train.py", "--tag", "\U0001f680 run"])  # fmt: skip
    assert (result.code, result.stderr) == (0, ""), result.stderr
    assert "\\ud83d" not in result.stdout and "\U0001f600" in result.stdout
    (job,) = loaded(result.stdout)
    assert commands(job) == [[
        "malaunch", "--framework", "torch_ddp", "--env", "MOOD=\U0001f600", "--", "python",
        "train.py", "--tag", "\U0001f680 run",
    ]] * 2  # fmt: skip


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--", "python", "\udcff.py"],
            "COMMAND (argument 2) '\\udcff.py': not UTF-8 text (bytes that decode to no "
            "character), which a Kubernetes manifest cannot hold",
        ),
        (
            ["--env", "A=b\udcfe", "--", "python", "x.py"],
            "--env 'A=b\\udcfe': not UTF-8 text (bytes that decode to no character), which a "
            "Kubernetes manifest cannot hold",
        ),
    ],
)
def test_bytes_that_are_not_utf8_are_64_naming_the_option(args: List[str], expected: str) -> None:
    result = run_cli(["render", "pytorchjob", *JOB, *args])
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == f"malaunch: error: {expected}\n"


def rendered(args: List[str]) -> str:
    """``malaunch render ARGS``'s output, from the command's own parser, in this process (a
    process per example would make the property test slow)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out):
        assert render.main(["pytorchjob", *JOB, *args], clean_env()) == 0
    out.flush()
    buffer = out.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


# What argv can hold: any Unicode scalar value but NUL (and surrogates, refused above).
ARGUMENT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    arguments=st.lists(ARGUMENT, min_size=1, max_size=4),
    env=st.dictionaries(NAME, ARGUMENT, max_size=3),
)
def test_any_text_reaches_the_manifest_exactly_and_kubernetes_takes_it(
    arguments: List[str], env: Dict[str, str]
) -> None:
    pairs = [f"{name}={value}" for name, value in env.items()]
    options = [token for pair in pairs for token in ("--env", pair)]
    documents = loaded(rendered([*options, "--", "python", *arguments]))
    job = documents[-1]
    expected = ["malaunch", "--framework", "torch_ddp", *options, "--", "python", *arguments]
    assert commands(job) == [expected, expected]
    for replica, template in templates(job):
        wrapped = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"check-{replica.lower()}"},
            "template": template,
        }
        kubernetes_validate.validate(wrapped, K8S_VERSION, strict=True)
