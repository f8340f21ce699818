"""Hostile files (issue 13): output paths, special files and permissions, through the CLI.

The installed ``malaunch`` runs as a subprocess with a time limit (a hang fails the test
instead of blocking the suite). Each refusal is checked for its exit code (SPEC §3) and its
exact one line; nothing may be left behind or replaced.

Output files (``ranktable convert`` / ``generate``, ``report --html``) are written by renaming
a new file over the target, so a FIFO, a device or a symlink there would be replaced: those are
made in ``tmp_path`` (a FIFO, a link, a device node of its own): never a real ``/dev`` entry,
which a regression would replace.

Permission errors need a file root cannot read: as root the tests drop ``CAP_DAC_OVERRIDE``
and ``CAP_DAC_READ_SEARCH`` with ``setpriv`` (util-linux) and run ``malaunch`` under it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import pytest

from malaunch.testing import CliResult, clean_env, run_cli
from malaunch.testing.commands import malaunch_executable
from malaunch.testing.commands import run_dir as latest_run

# Every command here is given this long (a hang guard, not a bound on speed): far less than
# the --wait-timeout 600 of the launches, so one that waits for its input instead of failing
# at once is stopped and fails its test.
TIMEOUT = 20.0
SHARED = Path(__file__).parents[1] / "fixtures" / "shared"
T2 = SHARED / "ranktable_template2_2pods_8dev.json"
HCCN = SHARED / "hccn_conf_example.conf"
ERROR = "malaunch: error: "
WARNING = "malaunch: warning: "


def refused(result: CliResult, code: int, line: str) -> None:
    """Exactly one line on stderr, nothing on stdout, the exit code."""
    shown = f"exit {result.code}\nstderr: {result.stderr[:2000]!r}\nstdout: {result.stdout[:300]!r}"
    assert (result.code, result.stderr, result.stdout) == (code, f"{ERROR}{line}\n", ""), shown


def entries(folder: Path) -> List[str]:
    return sorted(path.name for path in folder.iterdir())


# --- output files: a link is followed, anything but a regular file refused ------------------


def convert(out: Path) -> CliResult:
    return run_cli(["ranktable", "convert", str(T2), str(out)], timeout=TIMEOUT)


def generate(out: Path) -> CliResult:
    args = ["ranktable", "generate", str(out), "--hccn-conf", str(HCCN), "--server-id", "192.0.2.1"]
    return run_cli(args, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of a finished one-process run, for ``report``."""
    logs = tmp_path_factory.mktemp("run") / "logs"
    args = ["--framework", "torch_ddp", "--topology", "local", "--log-dir", str(logs), "--", "true"]
    result = run_cli(args, timeout=TIMEOUT)
    assert result.code == 0, result.stderr
    return latest_run(logs)


def report(run_dir: Path, out: Path) -> CliResult:
    return run_cli(["report", str(run_dir), "--html", str(out)], timeout=TIMEOUT)


# The commands that write an output file, and how their one line names it.
WRITERS = {"convert": "TARGET", "generate": "OUT", "report": "--html"}


def write(kind: str, out: Path, run_dir: Path) -> CliResult:
    if kind == "convert":
        return convert(out)
    return generate(out) if kind == "generate" else report(run_dir, out)


@pytest.mark.parametrize("kind", list(WRITERS))
def test_an_output_fifo_is_refused_and_stays(kind: str, tmp_path: Path, run_dir: Path) -> None:
    out = tmp_path / "out"
    os.mkfifo(out)
    result = write(kind, out, run_dir)
    name = WRITERS[kind]
    refused(result, 64, f"{name} {out}: is a FIFO, not a regular file (refusing to replace it)")
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
    assert entries(tmp_path) == ["out"]  # no temporary file either


@pytest.mark.parametrize("kind", list(WRITERS))
def test_an_output_directory_is_refused(kind: str, tmp_path: Path, run_dir: Path) -> None:
    out = tmp_path / "folder"
    out.mkdir()
    result = write(kind, out, run_dir)
    name = WRITERS[kind]
    refused(
        result, 64, f"{name} {out}: is a directory, not a regular file (refusing to replace it)"
    )
    assert entries(out) == []


@pytest.mark.parametrize("kind", list(WRITERS))
def test_an_output_device_is_refused(kind: str, tmp_path: Path, run_dir: Path) -> None:
    # A device node of its own in tmp_path (null's numbers), never a real /dev entry: should
    # the check ever regress, only this copy would be replaced.
    out = tmp_path / "null"
    try:
        os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("cannot make a device node here (no CAP_MKNOD)")
    result = write(kind, out, run_dir)
    name = WRITERS[kind]
    refused(result, 64, f"{name} {out}: is a device, not a regular file (refusing to replace it)")
    assert stat.S_ISCHR(os.lstat(out).st_mode)
    assert entries(tmp_path) == ["null"]


@pytest.mark.parametrize("kind", list(WRITERS))
@pytest.mark.parametrize("existing", [True, False], ids=["to-a-file", "dangling"])
def test_an_output_symlink_is_followed(
    kind: str, existing: bool, tmp_path: Path, run_dir: Path
) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "table.json"
    if existing:
        target.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = write(kind, link, run_dir)
    assert result.code == 0, result.stderr
    assert result.stdout.startswith(f"wrote {link}")
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    written = target.read_text()
    assert written.startswith("<!DOCTYPE html>" if kind == "report" else "{")
    assert entries(tmp_path) == ["link.json", "real"]
    assert entries(tmp_path / "real") == ["table.json"]


def test_a_loop_of_links_is_refused_and_stays(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.symlink_to(two)
    two.symlink_to(one)
    refused(convert(one), 64, f"TARGET {one}: Too many levels of symbolic links")
    assert one.is_symlink() and two.is_symlink()


# --- a launcher's own files that are not what it wrote ---------------------------------------

LOCAL = ("--framework", "torch_ddp", "--topology", "local")


def launch_in(log_dir: Path, *command: str) -> CliResult:
    args = [*LOCAL, "--console-ranks", "none", "--log-dir", str(log_dir), "--", *command]
    return run_cli(args, cwd=log_dir.parent, timeout=TIMEOUT)


@pytest.mark.parametrize(
    "make",
    [
        os.mkfifo,
        lambda path: path.write_text("[" * 100_000),
        lambda path: path.write_text('{"files": [' + "9" * 5000 + "]}"),
        lambda path: path.write_text('{"files": 7}'),
        lambda path: path.write_text("[]"),
    ],
    ids=["fifo", "deep", "huge-int", "files-not-a-list", "a-list"],
)
def test_a_manifest_in_the_log_dir_is_never_opened_nor_removed(
    make: Callable[[Path], None], tmp_path: Path
) -> None:
    """A FIFO named malaunch-run.json hung the launcher (its open blocked); a deep or huge-int
    one raised. The launcher no longer reads what is in the log dir: its run goes to a run
    folder of its own, and the file stays as it was."""
    logs = tmp_path / "logs"
    logs.mkdir()
    manifest = logs / "malaunch-run.json"
    make(manifest)
    before = os.lstat(manifest)
    result = launch_in(logs, "true")
    assert result.code == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith(WARNING)] == []
    assert "Traceback" not in result.stderr
    after = os.lstat(manifest)
    assert (after.st_mode, after.st_size, after.st_mtime_ns) == (
        before.st_mode, before.st_size, before.st_mtime_ns,
    )  # fmt: skip
    run = latest_run(logs)
    assert json.loads((run / "malaunch-run.json").read_text())["files"] == [
        str(run / "worker-0.log")
    ]


@pytest.fixture
def run_with_fifo_log(tmp_path: Path) -> Path:
    """A two-rank run whose rank 1 log has been replaced by a FIFO."""
    logs = tmp_path / "logs"
    args = [*LOCAL, "--nproc-per-node", "2", "--console-ranks", "none", "--log-dir", str(logs),
            "--", "sh", "-c", "echo hello"]  # fmt: skip
    result = run_cli(args, timeout=TIMEOUT)
    assert result.code == 0, result.stderr
    run = latest_run(logs)
    (run / "worker-1.log").unlink()
    os.mkfifo(run / "worker-1.log")
    return run


def test_logs_skip_a_fifo_log_with_one_warning(run_with_fifo_log: Path) -> None:
    logs = run_with_fifo_log
    result = run_cli(["logs", str(logs)], timeout=TIMEOUT)
    assert result.code == 0, result.stderr
    assert result.stdout == "[node 0 rank 0] hello\n"
    assert result.stderr == (
        f"{WARNING}{logs / 'worker-1.log'}: not a regular file; its lines are left out\n"
    )


def test_logs_follow_skips_a_fifo_log_and_index(run_with_fifo_log: Path) -> None:
    logs = run_with_fifo_log
    (logs / "malaunch-index.bin").unlink()
    os.mkfifo(logs / "malaunch-index.bin")  # its open blocked too
    proc = subprocess.Popen(
        [malaunch_executable(), "logs", "--follow", str(logs)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        # A follower stuck on the FIFO would never print: wait for its first line, bounded.
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        assert ready, "logs --follow printed nothing: stuck on the FIFO?"
        first = proc.stdout.readline()
        time.sleep(0.5)  # several polls: the FIFO must not be warned about again
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert first + out == "[node 0 rank 0] hello\n"
    assert err == f"{WARNING}{logs / 'worker-1.log'}: not a regular file; its lines are left out\n"


# --- permission errors: 66 at once ------------------------------------------------------------


@pytest.fixture(scope="module")
def unprivileged() -> List[str]:
    """The command prefix under which ``malaunch`` cannot read a mode-000 file."""
    if os.geteuid() != 0:
        return []  # an ordinary user already cannot
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): no way to deny a read")
    prefix = [setpriv, "--inh-caps=-all", "--ambient-caps=-all",
              "--bounding-set=-dac_override,-dac_read_search", "--"]  # fmt: skip
    return prefix


def run_denied(prefix: Sequence[str], args: Sequence[str], cwd: Path, **env: str) -> CliResult:
    """``malaunch args`` under ``prefix``; the probe first proves a mode-000 file is unreadable
    there (else the test would pass for the wrong reason or fail for one)."""
    probe = cwd / "probe"
    probe.write_text("x")
    probe.chmod(0)
    check = subprocess.run([*prefix, "cat", str(probe)], capture_output=True, check=False)
    assert check.returncode != 0, "the permission drop did not take: root still reads 000 files"
    probe.unlink()
    proc = subprocess.run(
        [*prefix, malaunch_executable(), *args],
        env=clean_env(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def unreadable_copy(source: Path, tmp_path: Path) -> Path:
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    copy.chmod(0)
    return copy


def test_validate_an_unreadable_table_is_66(unprivileged: List[str], tmp_path: Path) -> None:
    table = unreadable_copy(T2, tmp_path)
    result = run_denied(unprivileged, ["ranktable", "validate", str(table)], tmp_path)
    refused(result, 66, f"rank table {table}: permission denied (Permission denied)")


def test_convert_an_unreadable_table_is_66(unprivileged: List[str], tmp_path: Path) -> None:
    table = unreadable_copy(T2, tmp_path)
    out = tmp_path / "out.json"
    result = run_denied(unprivileged, ["ranktable", "convert", str(table), str(out)], tmp_path)
    refused(result, 66, f"rank table {table}: permission denied (Permission denied)")
    assert not out.exists()


def test_generate_an_unreadable_hccn_conf_is_66(unprivileged: List[str], tmp_path: Path) -> None:
    conf = unreadable_copy(HCCN, tmp_path)
    out = tmp_path / "out.json"
    args = ["ranktable", "generate", str(out), "--hccn-conf", str(conf), "--server-id", "h"]
    result = run_denied(unprivileged, args, tmp_path)
    refused(result, 66, f"{conf}: cannot read: Permission denied")
    assert not out.exists()


def test_a_launch_on_an_unreadable_table_is_66_at_once(
    unprivileged: List[str], tmp_path: Path
) -> None:
    table = unreadable_copy(T2, tmp_path)
    args = ["--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "600",
            "--log-dir", str(tmp_path / "logs"), "--", "true"]  # fmt: skip
    result = run_denied(unprivileged, args, tmp_path, RANK_TABLE_FILE=str(table))
    refused(result, 66, f"rank table {table}: permission denied (Permission denied)")


# --- Volcano's mounted host files: regular files, bounded, at most 100,000 hosts ------------


def many_hosts(count: int, separator: str = "\n") -> str:
    return separator.join(f"h{index}" for index in range(count))


def volcano_topology(folder: Path, source: str = "volcano") -> CliResult:
    env = clean_env({"MALAUNCH_VOLCANO_DIR": str(folder), "VC_TASK_INDEX": "0"})
    return run_cli(["topology", "--json", "--topology", source], env=env, timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("name", "content", "source", "code", "says"),
    [
        ("worker.host", many_hosts(100_001), "volcano", 65,
         "{file}: lists 100001 hosts; at most 100000 nodes in one job"),
        # A million lines were parsed one by one (past 20 s) before: counted first now.
        ("worker.host", many_hosts(1_000_000), "volcano", 65,
         "{file}: lists 1000000 hosts; at most 100000 nodes in one job"),
        ("VC_WORKER_HOSTS", many_hosts(100_001, ","), "volcano", 65,
         "{file}: lists 100001 hosts; at most 100000 nodes in one job"),
        ("ps.host", many_hosts(100_001), "volcano-tasks", 65,
         "{file}: lists 100001 hosts; at most 100000 nodes in one job"),
        ("VC_PS_HOSTS", many_hosts(100_001, ","), "volcano-tasks", 65,
         "{file}: lists 100001 hosts; at most 100000 nodes in one job"),
        ("worker.host", "a\n" * (17 << 20), "volcano", 65,
         "{file}: is 35651584 bytes, more than 33554432 (no host file of 100000 hosts is that "
         "large)"),
        ("worker.host", None, "volcano", 66, "cannot read {file}: is a FIFO, not a regular file"),
        ("VC_WORKER_HOSTS", None, "volcano", 66,
         "cannot read {file}: is a FIFO, not a regular file"),
        ("ps.host", None, "volcano-tasks", 66,
         "cannot read {file}: is a FIFO, not a regular file"),
    ],
    ids=["100001-lines", "1000000-lines", "100001-commas", "tasks-100001-lines",
         "tasks-100001-commas", "33MiB", "fifo", "fifo-comma-file", "tasks-fifo"],
)  # fmt: skip
def test_volcano_host_file(  # noqa: PLR0917 (pytest passes each parameter)
    name: str, content: Optional[str], source: str, code: int, says: str, tmp_path: Path
) -> None:
    host_file = tmp_path / name
    if content is None:
        os.mkfifo(host_file)  # was reported as "does not exist" (is_file() is false for it)
    else:
        host_file.write_text(content)
    if source == "volcano-tasks":
        (tmp_path / "worker.host").write_text("w0")
    refused(volcano_topology(tmp_path, source), code, says.format(file=host_file))


def test_volcano_host_file_of_100000_hosts_is_read(tmp_path: Path) -> None:
    (tmp_path / "worker.host").write_text(many_hosts(100_000))
    result = volcano_topology(tmp_path)
    assert result.code == 0, result.stderr
    assert len(json.loads(result.stdout)["nodes"]) == 100_000


# --- a completed rank table with an integer too long to convert: 65 at once -----------------


def test_a_launch_on_a_table_with_a_5000_digit_number_fails_at_once(tmp_path: Path) -> None:
    """It was "not ready" (unreadable JSON) for the whole --wait-timeout, then 69, with Python's
    hint about sys.set_int_max_str_digits() and no JSON path."""
    table = tmp_path / "table.json"
    text = T2.read_text().replace('"device_id": "0"', '"device_id": ' + "9" * 5000, 1)
    table.write_text(text)
    args = ["--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "600",
            "--log-dir", str(tmp_path / "logs"), "--", "true"]  # fmt: skip
    env = clean_env({"RANK_TABLE_FILE": str(table)})
    result = run_cli(args, env=env, timeout=TIMEOUT)
    path = "group_list[0].instance_list[0].devices[0].device_id"
    refused(result, 65, f"rank table {table}: {path}: an integer of 5000 digits (at most 4300)")


def test_a_table_not_completed_with_a_5000_digit_number_is_not_ready(tmp_path: Path) -> None:
    # Its producer may still rewrite it: waited for, and the reason names the JSON path.
    table = tmp_path / "table.json"
    text = T2.read_text().replace('"device_id": "0"', '"device_id": ' + "9" * 5000, 1)
    table.write_text(text.replace('"completed"', '"initializing"'))
    args = ["--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "0",
            "--log-dir", str(tmp_path / "logs"), "--", "true"]  # fmt: skip
    result = run_cli(args, env=clean_env({"RANK_TABLE_FILE": str(table)}), timeout=TIMEOUT)
    path = "group_list[0].instance_list[0].devices[0].device_id"
    refused(result, 69, f"rank table {table} (from RANK_TABLE_FILE) not ready after 0s: {path}: "
            "an integer of 5000 digits (at most 4300) (see --wait-timeout)")  # fmt: skip


# --- an unusable log dir: 64 before the topology wait, a dry run too --------------------------

LONG = "a" * 5000


def log_dir_case(tmp: Path, kind: str) -> Tuple[str, str, str]:
    """(the log dir, how the line shows it, why it cannot be one), made in ``tmp``."""
    if kind == "fifo":
        os.mkfifo(tmp / "fifo")
        why = "cannot create the log directory: it exists and is not a directory"
        return str(tmp / "fifo"), str(tmp / "fifo"), why
    if kind == "under-a-file":
        (tmp / "file").write_text("x")
        why = "cannot create the log directory: Not a directory"
        return str(tmp / "file" / "x"), str(tmp / "file" / "x"), why
    if kind == "5000-characters":
        path = f"{tmp}/{LONG}"
        shown = f"{path[:100]}... ({len(path)} characters)"  # a long path is cut in the line
        return path, shown, "cannot create the log directory: File name too long"
    return "/proc/self", "/proc/self", "cannot create files in the log directory: {reason}"


@pytest.mark.parametrize("kind", ["fifo", "under-a-file", "5000-characters", "proc-self"])
@pytest.mark.parametrize("how", ["--log-dir", "MALAUNCH_LOG_DIR", "MA_LOG_DIR"])
@pytest.mark.parametrize("dry_run", [False, True], ids=["launch", "dry-run"])
def test_an_unusable_log_dir_is_64_before_the_wait(
    kind: str, how: str, dry_run: bool, tmp_path: Path
) -> None:
    """It was 71 ("a process could not be started") after three warnings, and only after the
    topology wait; a dry run accepted it. A rank table that never comes (--wait-timeout 600)
    shows the check runs first."""
    log_dir, shown, why = log_dir_case(tmp_path, kind)
    args = ["--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "600"]
    env = {"RANK_TABLE_FILE": str(tmp_path / "never.json")}
    if how == "--log-dir":
        args += ["--log-dir", log_dir]
    else:
        env[how] = log_dir
    args += [*(["--dry-run"] if dry_run else []), "--", "true"]
    result = run_cli(args, env=clean_env(env), cwd=tmp_path, timeout=TIMEOUT)
    name = f"{how} " if how == "--log-dir" else f"{how}="
    line = f"{name}{shown}: {why}"
    if kind == "5000-characters" and how != "MA_LOG_DIR":
        # The option's type refuses a path no system call takes, as click parses it.
        line = f"{how}: {shown}: File name too long"
    # /proc/self: creating the probe file says ENOENT; a dry run, which creates nothing, finds
    # the folder not writable.
    line = line.format(reason="Permission denied" if dry_run else "No such file or directory")
    refused(result, 64, line)


def test_a_launch_that_fails_leaves_no_log_dir_it_made(tmp_path: Path) -> None:
    # The log dir is made before the topology wait; a launch that starts nothing removes it.
    args = ["--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "0",
            "--log-dir", "a/b/logs", "--", "true"]  # fmt: skip
    env = clean_env({"RANK_TABLE_FILE": str(tmp_path / "never.json")})
    result = run_cli(args, env=env, cwd=tmp_path, timeout=TIMEOUT)
    assert result.code == 69, result.stderr
    assert entries(tmp_path) == []
    (tmp_path / "a").mkdir()  # a folder that was there stays
    result = run_cli(args, env=env, cwd=tmp_path, timeout=TIMEOUT)
    assert result.code == 69, result.stderr
    assert entries(tmp_path) == ["a"]
    assert entries(tmp_path / "a") == []


def test_a_log_dir_that_fails_partway_down_leaves_no_folder(tmp_path: Path) -> None:
    # mkdir makes a/ and a/b/, then refuses a name of 300 characters: those two go again.
    args = ["--framework", "torch_ddp", "--log-dir", f"a/b/{'x' * 300}", "--", "true"]
    result = run_cli(args, env=clean_env(), cwd=tmp_path, timeout=TIMEOUT)
    assert result.code == 64, result.stderr
    assert "cannot create the log directory: File name too long" in result.stderr
    assert entries(tmp_path) == []


# --- ranktable generate: its options and hccn.conf through the one integer parser -----------

HUGE = "9" * 5000
AR = {n: chr(0x0660 + n) for n in range(10)}  # ARABIC-INDIC DIGIT n (int() takes them)


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--devices", HUGE],  # int() past its 4,300-digit limit: exit 70 before
         f'--devices "{"9" * 40}... (5000 characters)": "{"9" * 40}... (5000 characters)" is '
         "not a device id or range (expected e.g. 0-7, 0,1,2,3 or [0,8))"),
        (["--devices", f"0-{HUGE}"],
         f'--devices "0-{"9" * 38}... (5002 characters)": "{"9" * 40}... (5000 characters)" is '
         "not a device id (expected a number 0-15)"),
        (["--devices", f"[0,{HUGE})"],
         f'--devices "[0,{"9" * 37}... (5004 characters)": "{"9" * 40}... (5000 characters)" is '
         "not a device id (expected a number 0-15)"),
        # Arabic-Indic digits were read as devices 0-7.
        (["--devices", f"[{AR[0]},{AR[8]})"],
         f'--devices "[{AR[0]},{AR[8]})": "{AR[0]}" is not a device id (expected a number 0-15)'),
        (["--devices", f"{AR[0]}-{AR[7]}"],
         f'--devices "{AR[0]}-{AR[7]}": "{AR[0]}" is not a device id (expected a number 0-15)'),
        (["--devices", f"0,{AR[1]}"],
         f'--devices "0,{AR[1]}": "{AR[1]}" is not a device id or range (expected e.g. 0-7, '
         "0,1,2,3 or [0,8))"),
        (["--devices", "0-1_5"],
         '--devices "0-1_5": "1_5" is not a device id (expected a number 0-15)'),
        # Written into a table that `ranktable validate` and a launch then refused.
        (["--server-id", "$(id)"],
         '--server-id "$(id)": expected a host name or address of at most 63 characters'),
        (["--server-id", "a b"],
         '--server-id "a b": expected a host name or address of at most 63 characters'),
        (["--server-id", "a" * 64],
         f'--server-id "{"a" * 40}... (64 characters)": expected a host name or address of at '
         "most 63 characters"),
    ],
    ids=["devices-5000-digits", "devices-range-5000-digits", "devices-interval-5000-digits",
         "devices-arabic-interval", "devices-arabic-range", "devices-arabic-item",
         "devices-underscore", "server-id-shell", "server-id-space", "server-id-64-chars"],
)  # fmt: skip
def test_generate_refuses_an_option(options: List[str], line: str, tmp_path: Path) -> None:
    out = tmp_path / "hccl.json"
    args = ["ranktable", "generate", str(out), "--hccn-conf", str(HCCN), "--server-id",
            "192.0.2.1", *options]  # fmt: skip
    refused(run_cli(args, timeout=TIMEOUT), 64, line)
    assert entries(tmp_path) == []


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (f"address_{HUGE}=198.51.100.1\n",  # int() past its limit: exit 70 before
         f'line 1: "address_{"9" * 32}... (5008 characters)": expected address_<N> with N a '
         "device number"),
        (f"address_{AR[0]}=198.51.100.1\n",
         f'line 1: "address_{AR[0]}": expected address_<N> with N a device number'),
        ("address_0=198.51.100.1\naddress_1=" + "x" * 5000 + "\n",
         f'line 2: address_1: "{"x" * 40}... (5000 characters)" is not an IP address'),
        ("# comment\n" + "y" * 5000 + "\n",
         f'line 2: "{"y" * 40}... (5000 characters)": expected KEY=VALUE'),
    ],
    ids=["address-5000-digits", "address-arabic", "ip-5000-characters", "line-5000-characters"],
)  # fmt: skip
def test_generate_refuses_an_hccn_conf_line(text: str, line: str, tmp_path: Path) -> None:
    conf = tmp_path / "hccn.conf"
    conf.write_text(text)
    out = tmp_path / "hccl.json"
    args = ["ranktable", "generate", str(out), "--hccn-conf", str(conf), "--devices", "0",
            "--server-id", "192.0.2.1"]  # fmt: skip
    refused(run_cli(args, timeout=TIMEOUT), 65, f"{conf} {line}")
    assert entries(tmp_path) == ["hccn.conf"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[" * 100_000, "not JSON (nested too deeply to read)"),  # was exit 70, RecursionError
        ('{"a": ' + "9" * 5000 + "}", "not JSON (a: an integer of 5000 digits (at most 4300))"),
    ],
    ids=["deep", "huge-int"],
)
def test_report_ignores_a_hostile_manifest(content: str, reason: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "malaunch-run.json").write_text(content)
    out = tmp_path / "r.html"
    result = run_cli(["report", str(run), "--html", str(out)], timeout=TIMEOUT)
    assert result.code == 66
    assert result.stderr == (
        f"{WARNING}ignoring {run / 'malaunch-run.json'}: {reason}\n"
        f"{ERROR}{run}: no readable malaunch-run.json or malaunch-summary.json there or in a "
        "node-<k>/ below it; not the log dir of a malaunch run\n"
    )
    assert not out.exists()


# --- a Unix socket where a file is read: refused at once, as a FIFO is ----------------------


def bound_socket(path: Path) -> Path:
    """A Unix socket's file (it stays after the socket is closed): its open fails with ENXIO,
    which used to read as a passing error, so a launch waited out --wait-timeout."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
    return path


def test_a_launch_on_a_socket_rank_table_is_66_at_once(tmp_path: Path) -> None:
    table = bound_socket(tmp_path / "table.json")
    args = ["--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "600",
            "--log-dir", str(tmp_path / "logs"), "--dry-run", "--", "true"]  # fmt: skip
    result = run_cli(args, env=clean_env({"RANK_TABLE_FILE": str(table)}), timeout=TIMEOUT)
    refused(result, 66, f"rank table {table}: is a socket, not a regular file")


def test_validate_a_socket_is_66(tmp_path: Path) -> None:
    table = bound_socket(tmp_path / "table.json")
    result = run_cli(["ranktable", "validate", str(table)], timeout=TIMEOUT)
    refused(result, 66, f"rank table {table}: is a socket, not a regular file")


def test_a_socket_volcano_host_file_is_66(tmp_path: Path) -> None:
    hosts = bound_socket(tmp_path / "worker.host")
    result = volcano_topology(tmp_path)
    refused(result, 66, f"cannot read {hosts}: is a socket, not a regular file")
