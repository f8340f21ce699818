"""A fresh batch of hostile cases against the installed ``malaunch`` (issue 18's goal).

    .venv/bin/python benchmarks/adversarial.py [--only SUBSTRING] [--json OUT] [--keep]

Runs every case below through the real ``malaunch`` executable beside ``sys.executable``, each
in a temporary folder of its own, with a time limit, and prints one table row per case and the
share handled. A case is **handled** when:

- the launcher ended within its time limit (no hang);
- its exit code is the one documented for it (README "Exit codes"; a worker's own code);
- it printed at most one ``malaunch: error:`` line, exactly one for the launcher's own failures
  (64-78), naming the option, variable or file at fault; no traceback;
- no process of the case is left once the launchers have exited (this script is the child
  subreaper of everything it starts, so a daemon that left its group still comes back to it,
  and every process carries a marker variable that is looked for in ``/proc``);
- a run already in the log dir is still there, byte for byte, and where the launch never
  started a process, ``latest`` still names it;
- and the case's own check holds (nothing injected ran, the console kept no terminal control,
  the YAML loads back to what was given, ...).

The classes: hostile option values and their ``MALAUNCH_*`` twins on every command, the
platform's environment and files, log dirs (read-only, full and inode-less tmpfs mounts,
FIFOs, links), hostile children, signals at odd moments, strangers on a two-node job's port,
console readers that stall or vanish, and the tool commands' inputs. Needs root for the
tmpfs mounts (each unmounted after its case); without it those cases are skipped.
Nothing here asserts: this is a measurement, the tests are in tests/.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, cast

import yaml  # the project's render dependency

from malaunch.testing import clean_env

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))
PY = sys.executable
ERROR = "malaunch: error:"
OWN_CODES = {64, 65, 66, 69, 71, 74, 78}  # the launcher's own failures: one line, named
ROOT = os.geteuid() == 0

# --- the cases -------------------------------------------------------------------------------


@dataclasses.dataclass
class Proc:
    """One launcher of a case (two for a two-node job)."""

    argv: List[str]
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    delay: float = 0.0


@dataclasses.dataclass
class Case:
    id: str
    cls: str
    argv: List[str]
    codes: Set[int]
    names: Tuple[str, ...] = ()  # one of these in the error line (placeholders expanded)
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    setup: Optional[Callable[[Ctx], None]] = None
    action: Optional[Callable[[Ctx], None]] = None
    check: Optional[Callable[[Ctx], Optional[str]]] = None
    timeout: float = 25.0
    prev_run: bool = False  # put an earlier run in {tmp}/logs and check it stays
    latest_kept: bool = False  # ... and that `latest` still names it
    stdio: str = "file"
    procs: Optional[List[Proc]] = None  # several launchers instead of argv
    root: bool = False  # needs mounts


@dataclasses.dataclass
class Ctx:
    case: Case
    tmp: Path
    ports: Dict[str, int]
    procs: List[subprocess.Popen[bytes]] = dataclasses.field(default_factory=list)
    started: float = 0.0
    keep: List[Any] = dataclasses.field(default_factory=list)  # sockets, servers to close
    mounts: List[Path] = dataclasses.field(default_factory=list)
    stdout: bytes = b""
    stderr: bytes = b""

    def x(self, text: str) -> str:
        for key, value in (("{tmp}", str(self.tmp)), ("{py}", PY)):
            text = text.replace(key, value)
        for name, port in self.ports.items():
            text = text.replace("{" + name + "}", str(port))
        return text

    def out(self) -> str:
        return (self.stdout + self.stderr).decode("utf-8", "replace")

    def mount(self, where: str, options: str) -> Path:
        path = self.tmp / where
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
        self.mounts.append(path)
        return path


CASES: List[Case] = []


def case(cls: str, id: str, argv: Sequence[str], codes: Sequence[int], **kw: Any) -> None:
    CASES.append(Case(id, cls, list(argv), set(codes), **kw))


def local(*opts: str, nproc: int = 1, framework: str = "torch_ddp") -> List[str]:
    return ["--framework", framework, "--topology", "local", "--nproc-per-node", str(nproc),
            "--log-dir", "{tmp}/logs", *opts]  # fmt: skip


def pyc(code: str) -> List[str]:
    return ["--", "{py}", "-c", code]


DRY = ["--dry-run", "--", "true"]
PRINT = pyc("print('hello')")

# --- helpers for setups and checks ---


def write(rel: str, data: Any, mode: int = 0o644) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        path = ctx.tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = data(ctx) if callable(data) else data
        path.write_bytes(raw if isinstance(raw, bytes) else ctx.x(str(raw)).encode())
        path.chmod(mode)

    return setup


def both(*setups: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        for one in setups:
            one(ctx)

    return setup


def fifo(rel: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        (ctx.tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(ctx.tmp / rel)

    return setup


def link(rel: str, target: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        (ctx.tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx.tmp / rel).symlink_to(ctx.x(target))

    return setup


def mkdir(rel: str) -> Callable[[Ctx], None]:
    return lambda ctx: (ctx.tmp / rel).mkdir(parents=True, exist_ok=True)


def unix_socket(rel: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(ctx.tmp / rel))
        ctx.keep.append(sock)

    return setup


def absent(rel: str) -> Callable[[Ctx], Optional[str]]:
    def check(ctx: Ctx) -> Optional[str]:
        return f"{rel} exists: injected code ran" if (ctx.tmp / rel).exists() else None

    return check


def present(rel: str) -> Callable[[Ctx], Optional[str]]:
    def check(ctx: Ctx) -> Optional[str]:
        return None if (ctx.tmp / rel).exists() else f"{rel} was removed"

    return check


def console_clean(ctx: Ctx) -> Optional[str]:
    """No terminal control but SGR, and no forged launcher line on the console."""
    text = ctx.out()
    for bad in ("\x1b]", "\x1bP", "\x1b_", "\x1b^", "\x07", "\x9b", "\x9d", "\x1b[2J"):
        if bad in text:
            return f"console holds {bad!r}"
    for line in text.replace("\r", "\n").splitlines():
        if line.startswith("malaunch: error: forged"):
            return "a rank forged a launcher line"
    return None


def in_stdout(text: str) -> Callable[[Ctx], Optional[str]]:
    def check(ctx: Ctx) -> Optional[str]:
        return None if ctx.x(text) in ctx.stdout.decode("utf-8", "replace") else f"no {text!r}"

    return check


def yaml_round_trip(expected: str) -> Callable[[Ctx], Optional[str]]:
    def check(ctx: Ctx) -> Optional[str]:
        if ctx.procs[0].returncode != 0:
            return None  # refused: nothing to load
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            docs = list(yaml.load_all(ctx.stdout.decode("utf-8"), Loader=loader))
        except Exception as exc:
            return f"YAML does not load: {str(exc)[:80]}"
        return None if expected in json.dumps(docs, ensure_ascii=False) else "value changed"

    return check


def no_run_started(ctx: Ctx) -> Optional[str]:
    logs = ctx.tmp / "logs"
    runs = [p.name for p in logs.glob("run-*")] if logs.is_dir() else []
    return f"{len(runs)} runs in the log dir" if len(runs) > 1 else None


# --- the HTTP server that never answers (staging stuck) and port attacks ---


class Silent(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(60)

    do_HEAD = do_GET

    def log_message(self, *args: Any) -> None:
        pass


def silent_http(ctx: Ctx) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", ctx.ports["http"]), Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ctx.keep.append(server)


def signal_after(seconds: float, *sigs: int, gap: float = 0.3) -> Callable[[Ctx], None]:
    def action(ctx: Ctx) -> None:
        time.sleep(max(0.0, seconds - (time.monotonic() - ctx.started)))
        for sig in sigs:
            if ctx.procs[0].poll() is None:
                ctx.procs[0].send_signal(sig)
            time.sleep(gap)

    return action


def wait_port(port: int, limit: float = 10.0) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def attack(kind: str) -> Callable[[Ctx], None]:
    """Strangers on node 0's job port while node 1 joins."""

    def action(ctx: Ctx) -> None:
        port = ctx.ports["jport"]
        if not wait_port(port):
            return
        payloads = {
            "garbage": [os.urandom(256 * 1024)],
            "long-line": [b"x" * (8 * 1024 * 1024)],
            "http": [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"],
            "tls": [bytes.fromhex("16030100f4010000f00303") + os.urandom(240)],
            "deep-json": [b"[" * 40000 + b"\n"],
            "big-int": [b'{"t":"hello","node":' + b"9" * 5000 + b"}\n"],
            "not-utf8": [b'{"t":"\xff\xfe"}\n' * 100],
            "wrong-token": [b'{"t":"hello","node":1,"proof":"00","nonce":"' + b"a" * 32 + b'"}\n'],
        }
        if kind == "rst":
            for _ in range(300):
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=1)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                    s.close()
                except OSError:
                    pass
            return
        if kind == "slowloris":
            socks = []
            for _ in range(100):
                with contextlib.suppress(OSError):
                    socks.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            ctx.keep.extend(socks)
            end = time.monotonic() + 8
            while time.monotonic() < end and any(p.poll() is None for p in ctx.procs):
                for s in socks:
                    with contextlib.suppress(OSError):
                        s.send(b"{")
                time.sleep(0.5)
            return
        for _ in range(20):
            for data in payloads[kind]:
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=2)
                    s.settimeout(2)
                    s.sendall(data)
                    ctx.keep.append(s)
                except OSError:
                    pass

    return action


def two_nodes(command: str, extra: Sequence[str] = (), env1: Optional[Dict[str, str]] = None,
              delay1: float = 1.0) -> List[Proc]:  # fmt: skip
    procs = []
    for node in (0, 1):
        argv = ["--framework", "torch_ddp", "--topology", "volcano", "--nproc-per-node", "1",
                "--master-port", "{mport}", "--job-port", "{jport}", "--wait-timeout", "20",
                "--log-dir", f"{{tmp}}/logs/node-{node}", *extra,
                "--", "{py}", "-c", command]  # fmt: skip
        env = {"VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2", "VC_TASK_INDEX": str(node),
               "VC_WORKER_NUM": "2", **((env1 or {}) if node == 1 else {})}  # fmt: skip
        procs.append(Proc(argv, env, delay1 if node else 0.0))
    return procs


# --- rank tables ---

T1 = {
    "version": "1.0", "status": "completed", "server_count": "1",
    "server_list": [{"server_id": "127.0.0.1", "device": [
        {"device_id": "0", "device_ip": "192.168.100.1", "rank_id": "0"},
        {"device_id": "1", "device_ip": "192.168.100.2", "rank_id": "1"}]}],
}  # fmt: skip


def table(**change: Any) -> str:
    body = json.loads(json.dumps(T1))
    for key, value in change.items():
        if key == "device0":
            body["server_list"][0]["device"][0].update(value)
        else:
            body[key] = value
    return json.dumps(body)


MS_TABLE = ["--framework", "mindspore", "--topology", "ranktable", "--wait-timeout", "1",
            "--log-dir", "{tmp}/logs", *DRY]  # fmt: skip
TABLE_ENV = {"RANK_TABLE_FILE": "{tmp}/table.json"}


def _cases_options() -> None:
    c = "options"
    bad = [
        ("prefix-width-100", "--console-prefix", "{rank:>100}"),
        ("prefix-attribute", "--console-prefix", "{rank.__class__}"),
        ("prefix-index", "--console-prefix", "{rank[0]}"),
        ("prefix-nested", "--console-prefix", "{node:{rank}}"),
        ("prefix-str-as-int", "--console-prefix", "{host:d}"),
        ("prefix-unknown-field", "--console-prefix", "{pid}"),
        ("console-ranks-past-limit", "--console-ranks", "0-10000001"),
        ("console-ranks-backwards", "--console-ranks", "5-2"),
        ("console-ranks-open", "--console-ranks", "3-"),
        ("grace-1e309", "--grace-period", "1e309"),
        ("wait-past-7-days", "--wait-timeout", "604801"),
        ("heartbeat-1e-400", "--heartbeat-timeout", "1e-400"),
        ("forward-SIGKILL", "--forward-signals", "SIGKILL"),
        ("forward-SIGSTOP", "--forward-signals", "SIGSTOP"),
        ("forward-signal-65", "--forward-signals", "SIGRTMAX+1"),
        ("restart-on-minus", "--restart-on", "-1"),
        ("restart-on-signal-range", "--restart-on", "SIGKILL-SIGTERM"),
        ("backoff-negative-max", "--restart-backoff", "1:-1"),
        ("cpu-bind-99999", "--cpu-bind", "99999"),
        ("cpu-bind-one-list-two-ranks", "--cpu-bind", "0-4095"),
        ("cpu-bind-step", "--cpu-bind", "0-3:2"),
        ("keep-runs-19-digits", "--keep-runs", "9" * 19),
        ("tail-lines-negative", "--tail-lines", "-5"),
        ("nproc-10001", "--nproc-per-node", "10001"),
        ("env-nul-name", "--env", "A\x01B=1"),
        ("stage-in-no-url", "--stage-in", "data="),
        ("stage-in-no-local", "--stage-in", "=file:///tmp"),
        ("stage-out-unknown-field", "--stage-out", "out/{pid}=file:///tmp/x"),
        ("hang-stacks-upper", "--hang-stacks", "PY-SPY"),
        ("success-policy-empty", "--success-policy", ""),
    ]
    for id, opt, value in bad:
        argv = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
                "--log-dir", "{tmp}/logs", opt, value, *DRY]  # fmt: skip
        case(c, id, argv, [64], names=(opt,))
    # Values that may be taken or refused, but must work if taken (a real run).
    maybe = [
        ("prefix-conversion-r", "--console-prefix", "{rank!r} "),
        ("prefix-char-c", "--console-prefix", "{rank:c}|"),
        ("forward-SIGCHLD", "--forward-signals", "SIGCHLD"),
        ("forward-SIGPIPE", "--forward-signals", "SIGTERM,SIGPIPE"),
        ("forward-twice", "--forward-signals", "SIGUSR1,SIGUSR1,SIGTERM"),
        ("restart-on-lowercase", "--restart-on", "sigkill,1"),
        ("master-addr-trailing-dot", "--master-addr", "localhost."),
        ("master-addr-v4-mapped", "--master-addr", "::ffff:127.0.0.1"),
        ("master-addr-short-ipv4", "--master-addr", "127.1"),
        ("env-override-context", "--env", "MALAUNCH_CONTEXT={garbage"),
        ("env-override-heartbeat", "--env", "MALAUNCH_HEARTBEAT=@x\x7f"),
    ]
    for id, opt, value in maybe:
        argv = [*local(opt, value, nproc=2), *PRINT]
        case(c, id, argv, [0, 64], names=(opt,),
             check=lambda ctx: "NUL on the console" if b"\0" in ctx.stdout else None)  # fmt: skip
    case(c, "keep-runs-0-keeps", [*local("--keep-runs", "0"), *PRINT], [0], prev_run=True)
    case(c, "tail-lines-1e9-real", [*local("--tail-lines", "1000000000"), *pyc("exit(3)")],
         [3, 64], names=("--tail-lines",))  # fmt: skip


def _cases_commands() -> None:
    c = "command"
    case(c, "command-is-directory", [*local(), "--", "{tmp}"], [71], names=("{tmp}",))
    case(c, "shebang-missing-interpreter", [*local(), "--", "{tmp}/s.sh"], [71],
         names=("s.sh",), setup=write("s.sh", "#!/no/such/interp\necho\n", 0o755))  # fmt: skip
    case(c, "shebang-to-itself", [*local(), "--", "{tmp}/s.sh"], [71], names=("s.sh",),
         setup=write("s.sh", "#!{tmp}/s.sh\n", 0o755))  # fmt: skip
    case(c, "no-exec-bit", [*local(), "--", "{tmp}/s.sh"], [71], names=("s.sh",),
         setup=write("s.sh", "#!/bin/sh\necho\n", 0o644))  # fmt: skip
    case(c, "empty-executable", [*local(), "--", "{tmp}/s"], [71], names=("s",),
         setup=write("s", "", 0o755))  # fmt: skip
    case(c, "command-is-fifo", [*local(), "--", "{tmp}/f"], [71], names=("{tmp}/f",),
         setup=fifo("f"))  # fmt: skip
    case(c, "command-name-newline", [*local(), "--", "no\nsuch"], [71], names=("no",))
    case(c, "command-200-args-of-100k", [*local(), "--", "true", *(["x" * 100_000] * 20)],
         [0, 71])  # fmt: skip
    case(c, "conda-env-dotdot", [*local("--conda-env", "../../etc"), *DRY], [64, 66],
         names=("--conda-env",), env={"ANACONDA_DIR": "{tmp}/conda"},
         setup=mkdir("conda/envs"))  # fmt: skip
    case(c, "conda-dir-is-fifo", [*local(), "--", "python", "-c", "1"], [0, 64, 66],
         names=("ANACONDA_DIR",), env={"ANACONDA_DIR": "{tmp}/f", "DEFAULT_CONDA_ENV_NAME": "x"},
         setup=fifo("f"))  # fmt: skip


def _cases_twins() -> None:
    c = "twins"
    twins = [
        ("MALAUNCH_CONSOLE_PREFIX", "{rank.real}"),
        ("MALAUNCH_CONSOLE_RANKS", "0-10000001"),
        ("MALAUNCH_FORWARD_SIGNALS", "SIGKILL"),
        ("MALAUNCH_CPU_BIND", "99999"),
        ("MALAUNCH_ENV", "A"),
        ("MALAUNCH_STAGE_IN", "data"),
        ("MALAUNCH_KEEP_RUNS", "-1"),
        ("MALAUNCH_HEARTBEAT_TIMEOUT", "604801"),
        ("MALAUNCH_REJOIN_TIMEOUT", "nan"),
        ("MALAUNCH_DRY_RUN", "maybe"),
        ("MALAUNCH_DEBUG", "2"),
        ("MALAUNCH_JOB_CHANNEL", "perhaps"),
        ("MALAUNCH_HANG_STACKS", "gdb"),
        ("MALAUNCH_SYNC_INTERVAL", "-1"),
        ("MALAUNCH_TORCH_MODE", "elastic"),
    ]
    for var, value in twins:
        argv = ["--framework", "torch_ddp", "--topology", "local", "--log-dir", "{tmp}/logs",
                "--dry-run", "--", "true"]  # fmt: skip
        if var == "MALAUNCH_DRY_RUN":  # the option on the command line would win
            argv = [*argv[:6], "--", "true"]
        case(c, var, argv, [64], names=(var,), env={var: value})
    tools = [
        ("MALAUNCH_LOGS_GREP", "(?<=a)b", ["logs", "{tmp}/logs"]),
        ("MALAUNCH_LOGS_SINCE", "-5m", ["logs", "{tmp}/logs"]),
        ("MALAUNCH_LOGS_RANKS", "0-", ["logs", "{tmp}/logs"]),
        ("MALAUNCH_REPORT_HTML", "{tmp}", ["report", "{tmp}/logs"]),
        ("MALAUNCH_TOPOLOGY_WAIT_TIMEOUT", "inf", ["topology"]),
        ("MALAUNCH_PLUGINS_JSON", "yes please", ["plugins"]),
        ("MALAUNCH_NODES", "0", ["simulate", "--print-env", "--", "true"]),
        ("MALAUNCH_PLATFORM", "k8s", ["simulate", "--nodes", "1", "--print-env", "--", "true"]),
        ("MALAUNCH_NAME", "Upper_Case", ["render", "volcano", "--nodes", "1", "--framework",
                                         "torch_ddp", "--image", "i:1", "--", "x"]),
    ]  # fmt: skip
    for var, value, argv in tools:
        case(c, var, argv, [64], names=(var,), env={var: value}, prev_run=True)


def _cases_platform() -> None:
    c = "platform"
    dry = ["--framework", "torch_ddp", "--log-dir", "{tmp}/logs", *DRY]
    tf_dry = ["--framework", "tensorflow_ps", "--log-dir", "{tmp}/logs", *DRY]
    cl = '{"cluster":{"worker":["127.0.0.1:2222"]},"task":{"type":"worker","index":%s}}'
    for id, value in [("true", "true"), ("nan", "NaN"), ("1e400", "1e400"), ("str", '"0"'),
                      ("float", "0.0")]:  # fmt: skip
        # A string of digits is read as the number, as rank tables' numbers are (SPEC §4).
        case(c, f"TF_CONFIG-index-{id}", tf_dry, [0, 65] if id == "str" else [65],
             names=("TF_CONFIG",), env={"TF_CONFIG": cl % value})  # fmt: skip
    case(c, "TF_CONFIG-array", tf_dry, [64, 65], names=("TF_CONFIG",), env={"TF_CONFIG": "[]"})
    case(c, "TF_CONFIG-sparse-dup", tf_dry, [65], names=("TF_CONFIG",),
         env={"TF_CONFIG": '{"cluster":{"worker":{"0":"a:1","00":"b:1"}},'
                           '"task":{"type":"worker","index":0}}'})  # fmt: skip
    case(c, "TF_CONFIG-lone-surrogate", tf_dry, [65], names=("TF_CONFIG",),
         env={"TF_CONFIG": cl.replace("127.0.0.1", "\\ud800") % "0"})  # fmt: skip
    case(c, "DATASET_MAP-nan", [*dry], [0, 65], names=("DATASET_MAP",),
         env={"DATASET_MAP": '{"a": NaN}'})  # fmt: skip
    case(c, "DATASET_MAP-nested", [*dry], [65], names=("DATASET_MAP",),
         env={"DATASET_MAP": '{"a": {"b": "c"}}'})  # fmt: skip
    vc = {"VC_TASK_INDEX": "0", "MA_NUM_GPUS": "1"}
    for id, hosts in [
        ("label-64", "a" * 64 + ".x,b"),
        ("hyphen-first", "-a.b,c"),
        ("name-300", ("a" * 60 + ".") * 5 + "x,b"),
        ("underscore", "a_b,c"),
    ]:
        # Underscores are allowed on purpose (envparse: some internal DNS uses them).
        case(c, f"VC_WORKER_HOSTS-{id}", ["--topology", "volcano", *dry],
             [0, 65] if id == "underscore" else [65],
             names=("VC_WORKER_HOSTS",), env={**vc, "VC_WORKER_HOSTS": hosts})  # fmt: skip
    case(c, "VC_TASK_INDEX-inner-newline", ["--topology", "volcano", *dry], [65],
         names=("VC_TASK_INDEX",),
         env={"VC_WORKER_HOSTS": "a,b", "VC_TASK_INDEX": "0\n1"})  # fmt: skip
    # MA_NUM_GPUS=0 is what a CPU flavour sets: one process, the documented default.
    case(c, "MA_NUM_GPUS-0", ["--topology", "volcano", *dry], [0, 64, 65], names=("MA_NUM_GPUS",),
         env={"VC_WORKER_HOSTS": "a,b", "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "0"})  # fmt: skip
    case(c, "SLURM-step-range", ["--topology", "slurm", *dry], [0, 65],
         names=("SLURM_JOB_NODELIST",),
         env={"SLURM_JOB_NODELIST": "n[1-5:2]", "SLURM_NODEID": "0", "SLURM_JOB_ID": "1",
              "SLURM_NNODES": "3"})  # fmt: skip
    case(
        c,
        "SLURM-zero-pad-backwards",
        ["--topology", "slurm", *dry],
        [65],
        names=("SLURM_JOB_NODELIST",),
        env={"SLURM_JOB_NODELIST": "n[010-09]", "SLURM_NODEID": "0", "SLURM_JOB_ID": "1"},
    )
    kf = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "23456", "PET_NNODES": "1",
          "RANK": "0", "WORLD_SIZE": "1", "PET_NODE_RANK": "0"}  # fmt: skip
    for var, value in [("PET_NNODES", "1:4"), ("PET_NPROC_PER_NODE", "auto"),
                       ("MASTER_PORT", "0"), ("PET_NODE_RANK", "1")]:  # fmt: skip
        case(c, f"kubeflow-{var}-{value}", ["--topology", "kubeflow", *dry], [0, 64, 65],
             names=(var,), env={**kf, var: value})  # fmt: skip
    # Rank tables: files that are not what they seem.
    case(c, "table-dir-without-json", MS_TABLE, [66, 69], names=("{tmp}/t",), setup=mkdir("t"),
         env={"RANK_TABLE_FILE": "{tmp}/t"})  # fmt: skip
    case(c, "table-json-is-directory", MS_TABLE, [65, 66, 69], names=("jobstart_hccl.json",),
         setup=mkdir("t/jobstart_hccl.json"), env={"RANK_TABLE_FILE": "{tmp}/t"})  # fmt: skip
    case(c, "table-link-loop", MS_TABLE, [66, 69], names=("{tmp}/a",),
         setup=both(link("a", "{tmp}/b"), link("b", "{tmp}/a")),
         env={"RANK_TABLE_FILE": "{tmp}/a"})  # fmt: skip
    case(c, "table-urandom", MS_TABLE, [65, 66], names=("/dev/urandom",),
         env={"RANK_TABLE_FILE": "/dev/urandom"}, timeout=10)  # fmt: skip
    case(c, "table-proc-status", MS_TABLE, [65, 69], names=("/proc/self/status",),
         env={"RANK_TABLE_FILE": "/proc/self/status"})  # fmt: skip
    case(c, "table-unix-socket", MS_TABLE, [66], names=("{tmp}/s",), setup=unix_socket("s"),
         env={"RANK_TABLE_FILE": "{tmp}/s"})  # fmt: skip
    case(c, "table-sparse-300MiB", MS_TABLE, [65], names=("{tmp}/table.json",), env=TABLE_ENV,
         setup=lambda ctx: os.truncate(_touch(ctx.tmp / "table.json"), 300 << 20))  # fmt: skip
    case(c, "table-utf8-bom", MS_TABLE, [0, 65], names=("{tmp}/table.json",), env=TABLE_ENV,
         setup=write("table.json", b"\xef\xbb\xbf" + table().encode()))  # fmt: skip
    # JSON may be UTF-16 (RFC 8259 section 8.1 asks UTF-8, Python's reader takes both).
    case(c, "table-utf16", MS_TABLE, [0, 65, 69], names=("{tmp}/table.json",), env=TABLE_ENV,
         setup=write("table.json", table().encode("utf-16")))  # fmt: skip
    case(c, "table-deep", MS_TABLE, [65, 69], names=("{tmp}/table.json",), env=TABLE_ENV,
         setup=write("table.json", '{"status":"completed","x":' + "[" * 100000))  # fmt: skip
    for id, change, field in [
        ("server-count-1e3", {"server_count": "1e3"}, "server_count"),
        ("rank-id-bool", {"device0": {"rank_id": True}}, "rank_id"),
        ("device-id-minus-0", {"device0": {"device_id": "-0"}}, "device_id"),
        ("empty-server-list", {"server_list": [], "server_count": "0"}, "server"),
        ("device-ip-garbage", {"device0": {"device_ip": "$(id)"}}, "device_ip"),
        ("version-padded", {"version": " 1.0"}, "version"),
        ("status-completed-upper", {"status": "COMPLETED"}, "status"),
    ]:
        case(c, f"table-{id}", MS_TABLE, [65, 69], names=(field,), env=TABLE_ENV,
             setup=write("table.json", table(**cast(Dict[str, Any], change))))  # fmt: skip
    case(c, "table-truncated", MS_TABLE, [65, 69], names=("{tmp}/table.json",), env=TABLE_ENV,
         setup=write("table.json", table()[:90]))  # fmt: skip
    case(
        c,
        "MA_LOG_DIR-fifo",
        ["--framework", "torch_ddp", "--topology", "local", *DRY],
        [64],
        names=("MA_LOG_DIR",),
        setup=fifo("f"),
        env={"MA_LOG_DIR": "{tmp}/f"},
    )
    case(
        c,
        "volcano-host-file-urandom",
        ["--topology", "volcano", *dry],
        [65, 66],
        names=("worker.host",),
        setup=link("vc/worker.host", "/dev/urandom"),
        env={"MALAUNCH_VOLCANO_DIR": "{tmp}/vc", "VC_TASK_INDEX": "0"},
        timeout=10,
    )
    case(c, "MA_CURRENT_INSTANCE_NAME-escape", MS_TABLE, [65], names=("MA_CURRENT_INSTANCE",),
         env={"RANK_TABLE_FILE": "{tmp}/t2.json", "MA_CURRENT_INSTANCE_NAME": "x\x1b]0;pwn\x07"},
         setup=write("t2.json", json.dumps(T2)),
         check=console_clean)  # fmt: skip


T2 = {
    "status": "completed",
    "group_count": "1",
    "group_list": [{"group_name": "worker", "device_count": "1", "instance_count": "1",
                    "instance_list": [{"pod_name": "job-worker-0", "server_id": "127.0.0.1",
                                       "devices": [{"device_id": "0",
                                                    "device_ip": "192.168.1.1"}]}]}],
}  # fmt: skip


def _touch(path: Path) -> Path:
    path.touch()
    return path


def _cases_log_dirs() -> None:
    c = "log-dir"
    run = [*local(), *PRINT]
    case(c, "read-only-tmpfs", run, [64, 74], names=("{tmp}/logs",), root=True,
         setup=lambda ctx: ctx.mount("logs", "ro,size=64k"))  # fmt: skip
    case(
        c,
        "inodes-exhausted-tmpfs",
        run,
        [64, 74],
        names=("{tmp}/logs",),
        root=True,
        setup=lambda ctx: _fill_inodes(ctx.mount("logs", "size=1m,nr_inodes=4")),
    )
    case(c, "full-tmpfs", [*local(nproc=2), *pyc("print('x' * 100000)")], [0, 74],
         names=("{tmp}/logs",), root=True,
         setup=lambda ctx: _fill(ctx.mount("logs", "size=32k")))  # fmt: skip
    case(c, "fifo", run, [64], names=("{tmp}/logs",), setup=fifo("logs"))
    case(c, "dangling-link", run, [0, 64], names=("{tmp}/logs",), setup=link("logs", "{tmp}/no"))
    case(
        c,
        "link-to-elsewhere",
        run,
        [0],
        setup=both(mkdir("real"), link("logs", "{tmp}/real")),
        check=lambda ctx: None if list((ctx.tmp / "real").glob("run-*")) else "no run there",
    )
    case(c, "link-loop", run, [64], names=("{tmp}/logs",),
         setup=both(link("logs", "{tmp}/l2"), link("l2", "{tmp}/logs")))  # fmt: skip
    case(c, "latest-is-fifo", run, [0], prev_run=True,
         setup=lambda ctx: _replace_latest(ctx, "fifo"))  # fmt: skip
    case(
        c,
        "latest-is-directory",
        run,
        [0, 64],
        names=("latest",),
        prev_run=True,
        setup=lambda ctx: _replace_latest(ctx, "dir"),
        check=present("logs/latest/keep.txt"),
    )
    case(
        c,
        "latest-links-outside",
        run,
        [0],
        prev_run=True,
        setup=lambda ctx: _replace_latest(ctx, "outside"),
        check=present("outside/keep.txt"),
    )
    case(c, "old-run-links-outside-pruned", [*local("--keep-runs", "1"), *PRINT], [0],
         setup=both(write("outside/keep.txt", "x"),
                    link("logs/run-20000101-000000-aaaaaa", "{tmp}/outside")),
         check=present("outside/keep.txt"))  # fmt: skip
    case(c, "old-run-is-a-file-pruned", [*local("--keep-runs", "1"), *PRINT], [0],
         setup=write("logs/run-20000101-000000-aaaaaa", "not a run"))  # fmt: skip
    case(c, "2000-old-runs-pruned", [*local("--keep-runs", "1"), *PRINT], [0], timeout=40,
         setup=lambda ctx: [(ctx.tmp / f"logs/run-20000101-{i:06d}-aaaaaa").mkdir(parents=True)
                            for i in range(2000)])  # fmt: skip
    case(c, "fails-before-start-keeps-latest", [*local("--stage-in", "d=file://{tmp}/none"),
                                                *PRINT], [66], names=("{tmp}/none",),
         prev_run=True, latest_kept=True, check=no_run_started)  # fmt: skip
    case(c, "ma-mount-path-is-file", ["--framework", "mindspore", "--topology", "ranktable",
                                      "--log-dir", "{tmp}/logs", *DRY],
         [64, 66, 74], names=("MA_MOUNT_PATH", "{tmp}/mnt"),
         env={"RANK_TABLE_FILE": "{tmp}/t2.json", "MA_MOUNT_PATH": "{tmp}/mnt",
              "MA_CURRENT_INSTANCE_NAME": "job-worker-0"},
         setup=both(write("t2.json", json.dumps(T2)), write("mnt", "file")))  # fmt: skip


def _fill(path: Path) -> None:
    try:
        with open(path / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass


def _fill_inodes(path: Path) -> None:
    for i in range(100):
        try:
            (path / f"f{i}").touch()
        except OSError:
            return


def _replace_latest(ctx: Ctx, kind: str) -> None:
    latest = ctx.tmp / "logs" / "latest"
    latest.unlink()
    if kind == "fifo":
        os.mkfifo(latest)
    elif kind == "dir":
        latest.mkdir()
        (latest / "keep.txt").write_text("x")
    else:
        (ctx.tmp / "outside").mkdir()
        (ctx.tmp / "outside" / "keep.txt").write_text("x")
        latest.symlink_to(ctx.tmp / "outside")


def _cases_children() -> None:
    c = "children"
    daemon = ("import os,time\nif os.fork()==0:\n os.setsid()\n if os.fork()==0:\n"
              "  os.closerange(0,256); time.sleep(60)\n os._exit(0)\ntime.sleep(0.3)")  # fmt: skip
    cases = [
        ("closes-stdout", "import os,time; os.close(1); os.close(2); time.sleep(0.5)", [0]),
        ("1MiB-no-newline", "import sys; sys.stdout.write('y'*(1<<20))", [0]),
        ("64MiB-no-newline", "import os; [os.write(1,b'z'*(1<<20)) for _ in range(64)]", [0]),
        ("double-fork-daemon", daemon, [0]),
        (
            "daemon-without-env",
            "import os\nif os.fork()==0:\n os.setsid();"
            " os.execve('/bin/sleep',['sleep','60'],{})\n",
            [0],
        ),
        (
            "new-group-child",
            "import os,time\nif os.fork()==0:\n os.setpgid(0,0); time.sleep(60)\ntime.sleep(0.2)",
            [0],
        ),
        (
            "terminal-escapes",
            "import sys; sys.stdout.write('\\x1b]0;pwned\\x07\\x1b]52;c;"
            "cHduZWQ=\\x07\\x1bP+q\\x1b\\\\ ok\\x1b[2J\\rmalaunch: error: forged\\n\\x9b31m"
            "\\x9d0;t\\x9c\\n')",
            [0],
        ),
        ("invalid-utf8-and-nul", "import os; os.write(1, b'\\xff\\xfe\\x00\\xc3(\\n'*1000)", [0]),
        (
            "100k-carriage-returns",
            "import sys; [sys.stdout.write(f'\\r{i}') for i in range(100000)]",
            [0],
        ),
        ("exit-300", "import sys; sys.exit(300)", [44]),
        ("segfault", "import ctypes; ctypes.string_at(0)", [139]),
        (
            "sigterms-launcher",
            "import os,signal,time; os.kill(os.getppid(), signal.SIGTERM); time.sleep(30)",
            [143],
        ),
        (
            "sigkills-launcher",
            "import os,signal,time; os.kill(os.getppid(), signal.SIGKILL); time.sleep(30)",
            [137],
        ),
        (
            "100-children-then-fails",
            "import subprocess,sys; [subprocess.Popen(['sleep','60'])"
            " for _ in range(100)]; sys.exit(5)",
            [5],
        ),
        (
            "heartbeat-flood",
            "import os,socket; a=os.environ['MALAUNCH_HEARTBEAT']; "
            "s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.setblocking(False)\n"
            "addr='\\0'+a[1:] if a.startswith('@') else a\n"
            "for i in range(20000):\n try: s.sendto(os.urandom(200), addr)\n except OSError: pass",
            [0],
        ),
        (
            "error-file-is-fifo",
            "import os,sys; os.mkfifo(os.environ['TORCHELASTIC_ERROR_FILE']); sys.exit(1)",
            [1],
        ),
        (
            "error-file-50MiB",
            "import os,sys; open(os.environ['TORCHELASTIC_ERROR_FILE'],'w')"
            ".write('{\"message\":\"' + 'e'*(50<<20) + '\"}'); sys.exit(1)",
            [1],
        ),
        (
            "removes-run-folder",
            "import os,shutil; d=os.environ['MALAUNCH_LOG_DIR_RUN']"
            " if 'MALAUNCH_LOG_DIR_RUN' in os.environ else os.path.dirname("
            "os.environ['TORCHELASTIC_ERROR_FILE']); shutil.rmtree(d, ignore_errors=True)",
            [0, 74],
        ),
        ("closes-stdin-reads", "import sys; sys.stdin.read(); print('eof')", [0]),
    ]
    for id, code, codes in cases:
        extra = ("--hang-timeout", "30") if id == "heartbeat-flood" else ()
        case(
            c,
            id,
            [*local(*extra), *pyc(code)],
            codes,
            prev_run=True,
            check=console_clean if id == "terminal-escapes" else None,
            timeout=40,
        )
    case(c, "ignores-sigterm-other-fails", [*local("--grace-period", "1", nproc=2),
         *pyc("import os,signal,sys,time\nif os.environ['RANK']=='1':\n time.sleep(0.5);"
              " sys.exit(3)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)")],
         [3])  # fmt: skip
    case(
        c,
        "rank-forges-summary",
        [*local(), *pyc("print('malaunch: info: summary: exit code 0'); import sys; sys.exit(2)")],
        [2],
    )


def _cases_signals() -> None:
    c = "signals"
    never = ["--framework", "mindspore", "--topology", "ranktable", "--log-dir", "{tmp}/logs",
             "--wait-timeout", "60", *PRINT]  # fmt: skip
    nr = {"RANK_TABLE_FILE": "{tmp}/t.json"}
    nr_setup = write("t.json", json.dumps({"status": "initializing"}))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        case(c, f"{sig.name}-during-table-wait", never, [128 + sig], env=nr, setup=nr_setup,
             action=signal_after(1.0, sig), prev_run=True, latest_kept=True)  # fmt: skip
    case(c, "SIGTERM-at-0.05s", [*local(), *PRINT], [0, 143], action=signal_after(0.05,
         signal.SIGTERM), prev_run=True)  # fmt: skip
    case(c, "SIGINT-at-0.2s", [*local(), *PRINT], [0, 130], action=signal_after(0.2,
         signal.SIGINT), prev_run=True)  # fmt: skip
    case(c, "SIGTERM-during-stuck-stage-in",
         [*local("--stage-in", "d=http://127.0.0.1:{http}/f"), *PRINT], [143],
         setup=silent_http, action=signal_after(2.0, signal.SIGTERM), timeout=15,
         prev_run=True, latest_kept=True)  # fmt: skip
    case(
        c,
        "double-SIGTERM-ignoring-rank",
        [
            *local("--grace-period", "60"),
            *pyc(
                "import signal,time; signal.signal("
                "signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
            ),
        ],
        [143],
        action=signal_after(1.5, signal.SIGTERM, signal.SIGTERM),
        timeout=10,
    )
    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        case(c, f"{sig.name}-unforwarded", [*local(), *pyc("import time; time.sleep(30)")],
             [128 + sig], action=signal_after(1.5, sig))  # fmt: skip
    case(
        c,
        "SIGTSTP-then-SIGCONT",
        [*local(), *pyc("import time; time.sleep(2)")],
        [0],
        action=_stop_and_continue,
    )
    # docs/logs.md: Ctrl-C or SIGTERM end `logs --follow` with 0 (the way to end it).
    case(c, "SIGTERM-logs-follow", ["logs", "--follow", "{tmp}/logs"], [0], prev_run=True,
         action=signal_after(1.0, signal.SIGTERM))  # fmt: skip
    case(c, "SIGINT-logs-follow", ["logs", "-f", "{tmp}/logs"], [0], prev_run=True,
         action=signal_after(1.0, signal.SIGINT))  # fmt: skip
    case(c, "SIGTERM-simulate-2-nodes", ["simulate", "--nodes", "2", "--framework", "torch_ddp",
         "--log-dir", "{tmp}/logs", *pyc("import time; time.sleep(30)")], [143],
         action=signal_after(3.0, signal.SIGTERM))  # fmt: skip
    case(
        c,
        "SIGTERM-topology-wait",
        ["topology", "--topology", "ranktable", "--wait-timeout", "60"],
        [143],
        env=nr,
        setup=nr_setup,
        action=signal_after(1.0, signal.SIGTERM),
    )
    case(c, "SIGHUP-simulate-table-wait", ["simulate", "--nodes", "2", "--platform",
         "modelarts", "--framework", "mindspore", "--ranktable-never-ready", "--wait-timeout",
         "60", "--log-dir", "{tmp}/logs", *PRINT], [129],
         action=signal_after(2.5, signal.SIGHUP))  # fmt: skip


def _stop_and_continue(ctx: Ctx) -> None:
    time.sleep(0.8)
    ctx.procs[0].send_signal(signal.SIGSTOP)
    time.sleep(2)
    ctx.procs[0].send_signal(signal.SIGCONT)


def _cases_channel() -> None:
    c = "job-channel"
    ok = "import time; time.sleep(0.5); print('ok')"
    for kind in ("garbage", "long-line", "http", "tls", "deep-json", "big-int", "not-utf8",
                 "wrong-token", "rst", "slowloris"):  # fmt: skip
        case(c, f"port-{kind}", [], [0], procs=two_nodes(ok), action=attack(kind), timeout=40)
    case(c, "node1-occupied-job-port", [], [0, 64, 69, 71, 75], names=("{jport}", "job"),
         procs=two_nodes(ok), setup=_occupy_job_port, timeout=40)  # fmt: skip


def _occupy_job_port(ctx: Ctx) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", ctx.ports["jport"]))
    sock.listen(1)
    ctx.keep.append(sock)


def _cases_console() -> None:
    c = "console"
    noisy = "import sys,time\nfor i in range(3000):\n print('line', i, 'x'*2000)\nprint('end')"
    noisy_err = (
        noisy.replace("print(", "print(file=sys.stderr, *")
        .replace("*'line'", "*['line'],")
        .replace("'x'*2000)", "'x'*2000)")
    )
    noisy_err = ("import sys,time\nfor i in range(3000):\n sys.stderr.write('line %d %s\\n' %"
                 " (i, 'x'*2000))\nsys.stderr.write('end\\n')")  # fmt: skip
    hang = ("--hang-timeout", "4")
    case(c, "stdout-dev-full", [*local(), *pyc(noisy)], [0], stdio="devfull")
    case(c, "stdout-closed", [*local(), *pyc(noisy)], [0], stdio="closed-out")
    case(c, "stderr-closed", [*local(), *pyc(noisy_err)], [0], stdio="closed-err")
    case(c, "stdout-reader-gone", [*local(), *pyc(noisy)], [0], stdio="epipe-out")
    case(c, "stderr-pipe-stalled-12s", [*local(*hang), *pyc(noisy_err)], [0],
         stdio="stall-err:12", timeout=40)  # fmt: skip
    case(c, "stdout-socket-stalled-12s", [*local(*hang), *pyc(noisy)], [0],
         stdio="sockstall-out:12", timeout=40)  # fmt: skip
    case(c, "two-nodes-node1-stderr-stalled", [], [0], stdio="stall-err:12", timeout=50,
         procs=two_nodes(noisy_err, ("--heartbeat-timeout", "3")))  # fmt: skip
    case(c, "plugins-stdout-closed-pipe", ["plugins"], [0], stdio="epipe-out")
    case(c, "logs-stdout-closed-pipe", ["logs", "{tmp}/logs"], [0], stdio="epipe-out",
         prev_run=True)  # fmt: skip
    case(
        c,
        "logs-follow-stalled-then-SIGINT",
        ["logs", "-f", "{tmp}/logs"],
        [0],
        stdio="stall-out:3",
        prev_run=True,
        action=signal_after(1.5, signal.SIGINT),
    )


def _cases_tools() -> None:
    c = "tools"
    logs = ["logs", "{tmp}/logs"]
    for id, opts, codes in [
        ("since-huge", ["--since", "99999999999d"], [64]),
        ("since-epoch", ["--since", "1970-01-01T00:00:00"], [0, 64]),
        ("since-bad-date", ["--since", "2026-13-45T99:99"], [64]),
        ("grep-100k", ["--grep", "a|" * 50000 + "b"], [0, 64]),
        ("grep-backref", ["--grep", "(?P<x>a)(?P=x)"], [64]),
        ("grep-any-byte", ["--grep", "\\C"], [0, 64]),
        ("grep-repeat-1001", ["--grep", "a{1001}"], [0, 64]),
        ("ranks-huge", ["--ranks", "0-99999999999999"], [64]),
        ("nodes-negative", ["--nodes", "-1"], [64]),
        ("run-traversal", ["--run", "../../etc"], [64, 66]),
        ("run-absolute", ["--run", "/etc"], [64, 66]),
    ]:
        case(c, f"logs-{id}", [*logs, *opts], codes, names=(opts[0],), prev_run=True)

    def damage(kind: str) -> Callable[[Ctx], None]:
        def setup(ctx: Ctx) -> None:
            run = next((ctx.tmp / "logs").glob("run-*"))
            if kind == "log-is-zero":
                (run / "worker-0.log").unlink()
                (run / "worker-0.log").symlink_to("/dev/zero")
            elif kind == "index-random":
                (run / "malaunch-index.bin").write_bytes(os.urandom(1 << 20))
            elif kind == "index-odd":
                data = (run / "malaunch-index.bin").read_bytes()
                (run / "malaunch-index.bin").write_bytes(data[:-3])
            elif kind == "manifest-deep":
                (run / "malaunch-run.json").write_text("[" * 200000)
            elif kind == "summary-huge-int":
                (run / "malaunch-summary.json").write_text('{"exit_code": 1' + "0" * 5000 + "}")
            elif kind == "latest-loop":
                (ctx.tmp / "logs" / "latest").unlink()
                (ctx.tmp / "logs" / "latest").symlink_to("latest")
            elif kind == "log-not-utf8":
                (run / "worker-0.log").write_bytes(b"\xff\xfe\x80" * 1000 + b"\n")

        return setup

    for kind in ("log-is-zero", "index-random", "index-odd", "manifest-deep",
                 "summary-huge-int", "latest-loop", "log-not-utf8"):  # fmt: skip
        case(c, f"logs-{kind}", logs, [0, 65, 66], names=("{tmp}/logs",), timeout=10,
             setup=damage(kind), prev_run=True)  # fmt: skip
        case(c, f"report-{kind}", ["report", "{tmp}/logs", "--html", "{tmp}/r.html"],
             [0, 65, 66], names=("{tmp}/logs",), timeout=15, setup=damage(kind),
             prev_run=True)  # fmt: skip
    case(c, "report-html-read-only", ["report", "{tmp}/logs", "--html", "{tmp}/ro/r.html"],
         [74], names=("{tmp}/ro/r.html",), prev_run=True, root=True,
         setup=lambda ctx: ctx.mount("ro", "ro,size=64k"))  # fmt: skip
    case(c, "report-html-full", ["report", "{tmp}/logs", "--html", "{tmp}/full/r.html"],
         [74], names=("{tmp}/full/r.html",), prev_run=True, root=True,
         setup=lambda ctx: _fill(ctx.mount("full", "size=16k")))  # fmt: skip
    case(c, "report-script-in-log", ["report", "{tmp}/logs", "--html", "{tmp}/r.html"], [0],
         setup=_xss_run, check=_no_script)  # fmt: skip
    t2 = write("t2.json", json.dumps(T2))
    case(c, "convert-in-place", ["ranktable", "convert", "{tmp}/t2.json", "{tmp}/t2.json"],
         [0, 64], names=("{tmp}/t2.json",), setup=t2)  # fmt: skip
    case(c, "convert-to-read-only", ["ranktable", "convert", "{tmp}/t2.json", "{tmp}/ro/o.json"],
         [74], names=("{tmp}/ro/o.json",), root=True,
         setup=both(t2, _mount_read_only))  # fmt: skip
    case(c, "validate-pod-20-digits", ["ranktable", "validate", "{tmp}/t.json"], [65],
         names=("pod_name",), setup=write("t.json", json.dumps(T2).replace(
             "job-worker-0", "job-worker-" + "9" * 20)))  # fmt: skip
    case(
        c,
        "generate-hccn-40MB",
        [
            "ranktable",
            "generate",
            "{tmp}/o.json",
            "--hccn-conf",
            "{tmp}/h.conf",
            "--server-id",
            "10.0.0.1",
        ],
        [0, 65],
        names=("{tmp}/h.conf",),
        setup=write("h.conf", b"address_0=192.168.1.1\n" * 1_800_000),
        timeout=20,
    )
    case(c, "generate-hccn-not-utf8", ["ranktable", "generate", "{tmp}/o.json", "--hccn-conf",
         "{tmp}/h.conf", "--server-id", "10.0.0.1"], [65], names=("{tmp}/h.conf",),
         setup=write("h.conf", b"address_0=192.168.1.\xff\n"))  # fmt: skip
    render = ["render", "volcano", "--nodes", "2", "--framework", "torch_ddp", "--image", "i:1"]
    case(c, "render-name-300", [*render, "--name", "a" * 300, "--", "x"], [64], names=("--name",))
    case(c, "render-namespace-space", [*render, "--namespace", "kube system", "--", "x"], [64],
         names=("--namespace",))  # fmt: skip
    for id, value in [("alias", "*alias"), ("anchor", "&a x"), ("tag", "!!python/object:os.x"),
                      ("doc-end", "...\n---"), ("line-sep", "a\u2028b\u0085c"),
                      ("yes", "yes"), ("octal", "0o17"), ("bom", "\ufeffx")]:  # fmt: skip
        case(c, f"render-env-{id}", [*render, "--env", f"K={value}", "--", "x"], [0, 64],
             names=("--env",),
             check=yaml_round_trip(json.dumps(value, ensure_ascii=False)[1:-1]))  # fmt: skip
    case(c, "render-node-selector-colon", [*render, "--node-selector", "a=b: c", "--", "x"],
         [0, 64], names=("--node-selector",), check=yaml_round_trip("b: c"))  # fmt: skip
    case(c, "render-nodes-100001", [*render[:3], "100001", *render[4:], "--", "x"], [64],
         names=("--nodes",))  # fmt: skip
    case(c, "simulate-platform-dir-file", ["simulate", "--nodes", "1", "--platform-dir",
         "{tmp}/f", "--print-env", "--", "true"], [64], names=("--platform-dir",),
         setup=write("f", "x"))  # fmt: skip
    case(c, "simulate-replace-lost-negative", ["simulate", "--nodes", "2", "--replace-lost",
         "-1", "--print-env", "--", "true"], [64], names=("--replace-lost",))  # fmt: skip
    case(c, "simulate-print-env-backticks", ["simulate", "--nodes", "1", "--print-env",
         "--framework", "torch_ddp",
         "--env", "A=`touch {tmp}/PWNED`;$(touch {tmp}/PWNED2)", "--", "true"], [0],
         check=_print_env_sourced)  # fmt: skip
    case(
        c,
        "simulate-never-ready",
        [
            "simulate",
            "--nodes",
            "2",
            "--platform",
            "modelarts",
            "--framework",
            "mindspore",
            "--ranktable-never-ready",
            "--wait-timeout",
            "1",
            "--log-dir",
            "{tmp}/logs",
            *PRINT,
        ],
        [69],
        names=("node",),
    )
    case(c, "topology-not-ready", ["topology", "--topology", "ranktable", "--wait-timeout",
         "0.5"], [69], names=("{tmp}/t.json",), env={"RANK_TABLE_FILE": "{tmp}/t.json"},
         setup=write("t.json", '{"status": "initializing"}'))  # fmt: skip
    plugin = both(write("pp/evil.py", "raise KeyboardInterrupt('import')\n"),
                  write("pp/evil-1.0.dist-info/METADATA", "Name: evil\nVersion: 1.0\n"),
                  write("pp/evil-1.0.dist-info/entry_points.txt",
                        "[malaunch]\nevil = evil\n"))  # fmt: skip
    case(c, "plugin-raises-KeyboardInterrupt", ["plugins"], [78], names=("evil",),
         env={"PYTHONPATH": "{tmp}/pp"}, setup=plugin)  # fmt: skip
    plugin_exit = both(write("pp/evil.py", "import sys; sys.exit(0)\n"),
                       write("pp/evil-1.0.dist-info/METADATA", "Name: evil\nVersion: 1.0\n"),
                       write("pp/evil-1.0.dist-info/entry_points.txt",
                             "[malaunch]\nevil = evil\n"))  # fmt: skip
    case(c, "plugin-exits-0-on-import", [*local(), *DRY], [78], names=("evil",),
         env={"PYTHONPATH": "{tmp}/pp"}, setup=plugin_exit)  # fmt: skip


def _mount_read_only(ctx: Ctx) -> None:
    ctx.mount("ro", "ro,size=64k")


def _xss_run(ctx: Ctx) -> None:
    code = "print('<script>alert(1)</script></style><img src=x onerror=alert(2)>'); exit(4)"
    subprocess.run([MALAUNCH, *[ctx.x(a) for a in local()], "--", PY, "-c", code],
                   env=base_env(ctx), cwd=ctx.tmp, capture_output=True, check=False)  # fmt: skip


def _no_script(ctx: Ctx) -> Optional[str]:
    page = (ctx.tmp / "r.html").read_text(errors="replace") if (ctx.tmp / "r.html").exists() else ""
    if "<script>alert" in page or "<img src=x" in page:
        return "a rank's output reached the page as HTML"
    return None


def _print_env_sourced(ctx: Ctx) -> Optional[str]:
    lines = [ln for ln in ctx.stdout.decode().splitlines() if not ln.startswith("#")]
    (ctx.tmp / "env.sh").write_text("\n".join(lines) + "\n")
    subprocess.run(["bash", "-c", f"set -a; . {ctx.tmp}/env.sh"], cwd=ctx.tmp,
                   capture_output=True, check=False, timeout=10)  # fmt: skip
    for name in ("PWNED", "PWNED2"):
        if (ctx.tmp / name).exists():
            return f"sourcing --print-env ran {name}"
    return None


def build_cases() -> List[Case]:
    for make in (_cases_options, _cases_commands, _cases_twins, _cases_platform,
                 _cases_log_dirs, _cases_children, _cases_signals, _cases_channel,
                 _cases_console, _cases_tools):  # fmt: skip
        make()
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    return CASES


# --- running a case --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_env(ctx: Ctx) -> Dict[str, str]:
    env = clean_env()
    env.pop("PYTHONPATH", None)
    (ctx.tmp / ".novolcano").mkdir(exist_ok=True)
    env.update({"MALAUNCH_VOLCANO_DIR": str(ctx.tmp / ".novolcano"), "ADV_MARK": MARK,
                "HOME": str(ctx.tmp)})  # fmt: skip
    return env


MARK = f"adv-{uuid.uuid4().hex}"


def children() -> List[int]:
    pids: List[int] = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def marked() -> List[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if MARK.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def leftovers() -> List[str]:
    """What outlived the case's launchers, after a second's grace; each is then killed."""
    end = time.monotonic() + 1.5
    left: List[int] = []
    while time.monotonic() < end:
        reap()
        left = sorted({p for p in children() + marked() if alive(p)})
        if not left:
            return []
        time.sleep(0.1)
    names = []
    for pid in left:
        try:
            names.append(f"{pid}:{Path(f'/proc/{pid}/cmdline').read_bytes()[:40]!r}")
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.2)
    reap()
    return names


def snapshot(logs: Path) -> Dict[str, int]:
    run = next(logs.glob("run-*"))
    return {str(p.relative_to(logs)): p.stat().st_size for p in run.rglob("*") if p.is_file()}


class Stdio:
    """The launcher's stdout and stderr as the case wants them."""

    def __init__(self, mode: str, tmp: Path, index: int) -> None:
        self.mode, self.index = mode, index
        out, err = tmp / f".out{index}", tmp / f".err{index}"
        self.files = [open(out, "wb"), open(err, "wb")]  # noqa: SIM115 (closed in finish)
        self.readers: List[threading.Thread] = []
        self.captured = [b"", b""]
        self.closers: List[Any] = []
        self.stall = 0.0
        self.fds: List[Any] = [self.files[0], self.files[1]]
        self.preexec: Optional[Callable[[], None]] = None
        kind, _, seconds = mode.partition(":")
        stream = 1 if kind.endswith("-err") else 0
        applies = index == 0 or (mode.startswith("stall-err") and index == 1)
        if kind == "devfull":
            self.fds[0] = open("/dev/full", "wb")  # noqa: SIM115 (closed after the start)
            self.closers.append(self.fds[0])
        elif kind in ("closed-out", "closed-err"):
            fd = 1 if kind == "closed-out" else 2
            self.preexec = lambda: os.close(fd)
        elif kind == "epipe-out":
            r, w = os.pipe()
            os.close(r)
            self.fds[0] = w
            self.closers.append(w)
        elif kind in ("stall-out", "stall-err") and applies:
            r, w = os.pipe()
            self._drain(stream, r, float(seconds))
            self.fds[stream] = w
            self.closers.append(w)
        elif kind == "sockstall-out":
            a, b = socket.socketpair()
            self._drain(0, b.detach(), float(seconds))
            self.fds[0] = a.detach()
            self.closers.append(self.fds[0])

    def _drain(self, stream: int, fd: int, delay: float) -> None:
        def run() -> None:
            time.sleep(delay)
            chunks = []
            while True:
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                chunks.append(data)
            os.close(fd)
            self.captured[stream] = b"".join(chunks)[-200_000:]

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.readers.append(thread)

    def after_start(self) -> None:
        for item in self.closers:
            if isinstance(item, int):
                os.close(item)
            else:
                item.close()

    def finish(self, tmp: Path) -> Tuple[bytes, bytes]:
        for thread in self.readers:
            thread.join(timeout=60)
        for f in self.files:
            f.close()
        out = (tmp / f".out{self.index}").read_bytes()[-200_000:] + self.captured[0]
        err = (tmp / f".err{self.index}").read_bytes()[-200_000:] + self.captured[1]
        return out, err


def run_case(c: Case, root: Path, template: Path) -> Dict[str, Any]:  # noqa: PLR0912, PLR0915 (one case's whole life, read top to bottom)
    tmp = root / c.id
    tmp.mkdir()
    ports = {"mport": free_port(), "jport": free_port(), "http": free_port()}
    ctx = Ctx(c, tmp, ports)
    env0 = base_env(ctx)
    result: Dict[str, Any] = {"id": c.id, "class": c.cls, "expected": sorted(c.codes)}
    before: Dict[str, int] = {}
    latest = ""
    try:
        if c.prev_run:
            shutil.copytree(template, tmp / "logs", symlinks=True)
            latest = os.readlink(tmp / "logs" / "latest")
        if c.setup:
            c.setup(ctx)
        if c.prev_run:  # after the setup: what a case damages on purpose is its input
            before = snapshot(tmp / "logs")
        procs = c.procs or [Proc(c.argv)]
        stdios = [Stdio(c.stdio, tmp, i) for i in range(len(procs))]
        result["command"] = _shown(procs[0], ctx)
        ctx.started = time.monotonic()
        action = threading.Thread(target=c.action, args=(ctx,), daemon=True) if c.action else None
        for i, (p, io) in enumerate(zip(procs, stdios)):
            time.sleep(max(0.0, p.delay - (time.monotonic() - ctx.started)))
            env = {**env0, **{k: ctx.x(v) for k, v in {**c.env, **p.env}.items()}}
            ctx.procs.append(
                subprocess.Popen(
                    [MALAUNCH, *[ctx.x(a) for a in p.argv]],
                    env=env,
                    cwd=tmp,
                    stdin=subprocess.DEVNULL,
                    stdout=io.fds[0],
                    stderr=io.fds[1],
                    preexec_fn=io.preexec,  # noqa: PLW1509 (closes one descriptor, takes no lock)
                )
            )
            io.after_start()
            if i == 0 and action:
                action.start()
        codes, hung = [], False
        for proc in ctx.procs:
            left = c.timeout - (time.monotonic() - ctx.started)
            try:
                codes.append(proc.wait(timeout=max(0.1, left)))
            except subprocess.TimeoutExpired:
                hung = True
                proc.kill()
                codes.append(proc.wait())
        result["seconds"] = round(time.monotonic() - ctx.started, 2)
        left_behind = leftovers()
        outs = [io.finish(tmp) for io in stdios]
        if action:
            action.join(timeout=5)
        ctx.stdout = b"".join(o for o, _ in outs)
        ctx.stderr = b"".join(e for _, e in outs)
        result["codes"] = codes
        problems = verdict(ctx, codes, hung, left_behind, outs)
        if c.prev_run:
            problems += _kept(tmp / "logs", before, latest if c.latest_kept else "")
        result["problems"] = problems
    except Exception as exc:
        result.setdefault("codes", [])
        result["problems"] = [f"harness: {type(exc).__name__}: {exc}"]
    finally:
        for item in ctx.keep:
            with contextlib.suppress(OSError):
                (item.shutdown if hasattr(item, "serve_forever") else item.close)()
        for proc in ctx.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        leftovers()
        for path in reversed(ctx.mounts):
            subprocess.run(["umount", "-l", str(path)], check=False)
    err_lines = [ln for ln in ctx.stderr.decode("utf-8", "replace").splitlines()
                 if ln.startswith(ERROR)]  # fmt: skip
    result["observed_line"] = err_lines[0][:200] if err_lines else ""
    result["handled"] = not result["problems"]
    return result


def _shown(p: Proc, ctx: Ctx) -> str:
    env = " ".join(f"{k}={ctx.x(v)[:40]!r}" for k, v in {**ctx.case.env, **p.env}.items())
    args = " ".join(ctx.x(a)[:60] for a in p.argv).replace(PY, "python")
    return (f"{env} " if env else "") + "malaunch " + args.replace(str(ctx.tmp), "$T")


def verdict(ctx: Ctx, codes: List[int], hung: bool, left: List[str],
            outs: List[Tuple[bytes, bytes]]) -> List[str]:  # fmt: skip
    c, problems = ctx.case, []
    if hung:
        problems.append(f"no end within {c.timeout:.0f} s")
    if left:
        problems.append(f"left running: {', '.join(left[:3])}")
    for index, (code, (out, err)) in enumerate(zip(codes, outs)):
        who = f"node {index}: " if len(codes) > 1 else ""
        if not hung and code not in c.codes and -code + 128 not in c.codes:
            problems.append(f"{who}exit {code}, expected {sorted(c.codes)}")
        text = (out + err).decode("utf-8", "replace")
        if any(ln.startswith("Traceback (most recent call last)") for ln in text.splitlines()):
            problems.append(f"{who}traceback")
        errors = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.startswith(ERROR)]
        if len(errors) > 1:
            problems.append(f"{who}{len(errors)} error lines")
        if code in OWN_CODES and len(codes) == 1 and not errors:
            problems.append(f"{who}exit {code} without an error line")
        names = [ctx.x(n) for n in c.names]
        if errors and names and code in OWN_CODES and not any(n in errors[0] for n in names):
            problems.append(f"{who}error names none of {names}")
    if c.check and not hung:
        found = c.check(ctx)
        if found:
            problems.append(found)
    return problems


def _kept(logs: Path, before: Dict[str, int], latest: str) -> List[str]:
    problems = []
    for name, size in before.items():
        path = logs / name
        if not path.is_file() or path.stat().st_size != size:
            problems.append(f"earlier run lost or changed: {name}")
            break
    if latest:
        try:
            now = os.readlink(logs / "latest")
        except OSError:
            now = "(gone)"
        if now != latest:
            problems.append(f"`latest` moved to {now} though no process started")
    return problems


def make_template(root: Path) -> Path:
    where = root / "template"
    where.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALAUNCH_")}
    code = "print('an earlier run'); print('loss 0.5')"
    argv = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
            "--log-dir", str(where / "logs"), "--", PY, "-c", code]  # fmt: skip
    subprocess.run([MALAUNCH, *argv], env=env, cwd=where, capture_output=True, check=True)
    return where / "logs"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="run the cases whose id or class holds this")
    parser.add_argument("--json", dest="json_out", help="write every case's record here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = parser.parse_args(argv)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the cases come to us
    random.seed(0)
    cases = [c for c in build_cases() if args.only in c.id or args.only == c.cls]
    root = Path(tempfile.mkdtemp(prefix="malaunch-adversarial-"))
    started = time.monotonic()
    results = []
    try:
        template = make_template(root)
        for c in cases:
            if c.root and not ROOT:
                continue
            record = run_case(c, root, template)
            results.append(record)
            mark = "yes" if record["handled"] else "NO "
            print(f"{mark} {c.cls:<12} {c.id:<40} {record['codes']!s:<10} "
                  f"{'; '.join(record['problems'])[:150]}", flush=True)  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    summary(results, time.monotonic() - started)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    return 0


def summary(results: List[Dict[str, Any]], seconds: float) -> None:
    by_class: Dict[str, List[int]] = {}
    for r in results:
        counts = by_class.setdefault(r["class"], [0, 0])
        counts[0] += 1
        counts[1] += int(r["handled"])
    print("\n| class | cases | handled |\n|---|---|---|")
    for cls, (total, ok) in by_class.items():
        print(f"| {cls} | {total} | {ok} |")
    handled = sum(r["handled"] for r in results)
    share = 100.0 * handled / max(1, len(results))
    print(f"| all | {len(results)} | {handled} ({share:.1f} %) |\n\n{seconds:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
