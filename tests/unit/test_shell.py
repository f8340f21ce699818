"""malaunch.shell, the one writer of text for a shell: what it quotes, a real shell reads back
exactly, and nothing in a value runs.

Each property test writes the lines to a file and has a real bash source it, then print what
arrived (the environment of a child, or a command's arguments, as bytes); every payload would
create a canary file if it ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malaunch import shell

CANARY = "canary"
# Things that would run if a value escaped its quotes, each creating the canary file.
PAYLOADS = [
    f"$(touch {CANARY})", f"`touch {CANARY}`", f"; touch {CANARY}", f"\ntouch {CANARY}\n",
    f"'; touch {CANARY}; '", f'"; touch {CANARY}; "', f"$'\\x27'; touch {CANARY} #",
    f"\\'; touch {CANARY} #'", "${PATH}", "$HOME", "\nB=forged", "a b", "'", '"', "\\",
    f"\x01'; touch {CANARY}; '", "\U0001f600", "é", "\r", "\x7f", "\x9b", "\udcff",
]  # fmt: skip
# Any character an environment value or an argument can hold: no NUL, and of the lone
# surrogates only those that stand for a byte that was not UTF-8 (surrogateescape).
CHARS = st.characters(exclude_categories=["Cs"], exclude_characters="\x00") | st.sampled_from(
    [chr(code) for code in range(0xDC80, 0xDD00)]
)
VALUES = st.lists(st.text(CHARS, max_size=12) | st.sampled_from(PAYLOADS), max_size=4).map("".join)
NAMES = st.from_regex(r"T_[A-Za-z0-9_]{0,12}", fullmatch=True)


def sourced(tmp_path: Path, text: str, then: str = "exec env -0", program: str = "bash") -> bytes:
    """``set -a; . FILE`` in a real shell whose environment is otherwise nearly empty, then
    ``then`` (by default: every variable a child process receives, NUL-separated)."""
    script = tmp_path / "lines.sh"
    script.write_bytes(os.fsencode(text + "\n"))
    result = subprocess.run(
        [program, "-c", f'set -a; . "$1"; {then}', "sh", str(script)],
        env={"PATH": os.environ["PATH"]}, cwd=tmp_path, capture_output=True, check=True,
        timeout=30,
    )  # fmt: skip
    return result.stdout


def env_of(dumped: bytes) -> Dict[bytes, bytes]:
    pairs = (entry.partition(b"=") for entry in dumped.split(b"\0") if entry)
    return {name: value for name, _, value in pairs}


@settings(
    max_examples=150, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(variables=st.dictionaries(NAMES, VALUES, min_size=1, max_size=6))
def test_sourced_assignments_export_each_value_exactly_and_run_nothing(
    tmp_path: Path, variables: Dict[str, str]
) -> None:
    (tmp_path / CANARY).unlink(missing_ok=True)
    lines = [shell.assignment(name, value) for name, value in variables.items()]
    assert all("\n" not in line for line in lines)  # one variable, one line
    env = env_of(sourced(tmp_path, "\n".join(lines)))
    for name, value in variables.items():
        assert env[name.encode()] == os.fsencode(value)
    forged = {key for key in env if key.startswith(b"T_") or key == b"B"} - {
        name.encode() for name in variables
    }
    assert forged == set()
    assert not (tmp_path / CANARY).exists()


@settings(
    max_examples=100, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(argv=st.lists(VALUES, min_size=1, max_size=5))
def test_a_command_line_runs_exactly_its_arguments_and_as_a_comment_nothing(
    tmp_path: Path, argv: List[str]
) -> None:
    (tmp_path / CANARY).unlink(missing_ok=True)
    line = shell.command_line(argv)
    assert "\n" not in line
    # As `# launcher:` prints it: a comment when the file is sourced...
    env = env_of(sourced(tmp_path, f"# launcher: {line}"))
    assert not (tmp_path / CANARY).exists()
    assert not any(key.startswith(b"T_") or key == b"B" for key in env)
    # ...and, pasted after the `# launcher: `, the command itself (printf prints the
    # arguments it was given, each ended by a NUL).
    printed = sourced(tmp_path, f"printf '%s\\0' {line}; exit")
    assert printed.split(b"\0")[:-1] == [os.fsencode(word) for word in argv]
    assert not (tmp_path / CANARY).exists()


@pytest.mark.skipif(shutil.which("dash") is None, reason="no dash on this machine")
def test_a_shell_without_dollar_quotes_reads_harmless_words(tmp_path: Path) -> None:
    """dash before 0.5.13 has no $'...': it reads the escaped form as '$' and one single-quoted
    word, a different value but nothing that runs, for every payload."""
    lines = [shell.assignment(f"T_{index}", value) for index, value in enumerate(PAYLOADS)]
    sourced(tmp_path, "\n".join(lines), program="dash")
    sourced(tmp_path, f"# launcher: {shell.command_line(PAYLOADS)}", program="dash")
    assert not (tmp_path / CANARY).exists()


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("plain", "plain"),
        ("/a/path-1.0:x=y", "/a/path-1.0:x=y"),
        ("", "''"),
        ("a b", "'a b'"),
        ("it's", "'it'\"'\"'s'"),
        ("$(id)", "'$(id)'"),
        ("a\nb", "$'a\\nb'"),
        ("tab\there's\\", "$'tab\\there\\x27s\\\\'"),
        ("\x1b[31m", "$'\\x1b[31m'"),
        ("\x85", "$'\\xc2\\x85'"),
        ("\udcff\u00e9", "$'\\xff\u00e9'"),
    ],
)
def test_quote(word: str, quoted: str) -> None:
    assert shell.quote(word) == quoted


def test_what_has_no_shell_form() -> None:
    with pytest.raises(ValueError, match=r"^a shell word cannot hold NUL$"):
        shell.quote("a\x00b")
    with pytest.raises(ValueError, match=r"^a shell word cannot hold '\\ud800', which stands"):
        shell.quote("\ud800")


@pytest.mark.parametrize("name", ["A", "_", "a_1", "MALAUNCH_X", "_9"])
def test_shell_names(name: str) -> None:
    assert shell.is_name(name)
    assert shell.assignment(name, "v") == f"{name}=v"


@pytest.mark.parametrize("name", ["", "1A", "A-B", "A B", "A=B", "é", "A\n", "$(id)", "\uff21"])
def test_a_name_no_shell_can_assign_is_refused(name: str) -> None:
    assert not shell.is_name(name)
    expected = (
        f"{name!r} is not a shell variable name (ASCII letters, digits and '_', no digit first)"
    )
    with pytest.raises(ValueError) as raised:
        shell.assignment(name, "v")
    assert str(raised.value) == expected
