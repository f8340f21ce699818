"""A stage-in from a server that does not say a file's size arrives whole, never empty.

fsspec lists an HTTP file without ``Content-Length`` (a generated file, a proxy that streams)
with no size; the stager took that for 0 bytes, wrote an empty file and said "1 file, 0 B":
the job then ran on no data with exit 0. Sizes are generated, around the 8 MiB read piece.
"""

from __future__ import annotations

import http.server
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malaunch.testing import clean_env, malaunch_executable, run_cli

PIECE = 8 * 2**20


class _NoLength(http.server.BaseHTTPRequestHandler):
    """Serves ``/<n>.bin`` as n bytes, HTTP/1.0 style: the body ends when the connection
    closes, and no header says how long it is."""

    protocol_version = "HTTP/1.0"

    def _head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._head()

    def do_GET(self) -> None:
        size = int(self.path.strip("/").split(".")[0])
        self._head()
        block = bytes(range(256)) * 4096
        while size > 0:
            self.wfile.write(block[: min(size, len(block))])
            size -= len(block)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoLength)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


CHECK = "import os, sys; sys.exit(0 if os.path.getsize('data.bin') == int(sys.argv[1]) else 9)"


@settings(
    max_examples=5,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(size=st.sampled_from([1, 4096, PIECE - 1, PIECE + 1]) | st.integers(1, 3 * PIECE))
def test_a_file_without_a_listed_size_arrives_whole(server: str, tmp_path: Path, size: int) -> None:
    args = ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs")]
    args += ["--stage-in", f"data.bin={server}/{size}.bin", "--", "python", "-c", CHECK, str(size)]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert (tmp_path / "data.bin").stat().st_size == size
    # Nothing says it is unchanged: a second run fetches it again, whole.
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert (tmp_path / "data.bin").stat().st_size == size


class _Drip(http.server.BaseHTTPRequestHandler):
    """Says a file of 10 MB, then sends a byte a second: a transfer stuck in a slow server."""

    protocol_version = "HTTP/1.1"

    def _head(self) -> None:
        self.send_response(200)
        small = self.path.endswith("/ok.bin")  # a file that arrives at once
        self.send_header("Content-Length", "2" if small else str(10 * 2**20))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._head()

    def do_GET(self) -> None:
        self._head()
        if self.path.endswith("/ok.bin"):
            self.wfile.write(b"ok")
            return
        try:
            for _ in range(120):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(1)
        except OSError:
            pass

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def dripping() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Drip)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/big.bin"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _partials(folder: Path) -> List[str]:
    return [path.name for path in folder.rglob("*.malaunch-partial")]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_transfer_left_behind_leaves_no_half_written_file(
    dripping: str, tmp_path: Path, signum: int
) -> None:
    # The launcher stops waiting for a transfer stuck in a slow read after a second or so; its
    # temporary file stayed in the data folder ('.big.bin.<id>.malaunch-partial'), and so did
    # one of a launcher killed mid-file, for good.
    data = tmp_path / "data"
    args = ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs")]
    args += ["--stage-in", f"data/big.bin={dripping}", "--", "python", "-c", "pass"]
    proc = subprocess.Popen(
        [malaunch_executable(), *args], env=clean_env(), cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not _partials(data) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _partials(data), "the download never began"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == (-signum if signum == signal.SIGKILL else 128 + signum), err
    if signum == signal.SIGKILL:
        # Nothing runs to clean up after SIGKILL: the next stage-in of that mapping does.
        assert _partials(data)
        args[args.index(f"data/big.bin={dripping}")] = f"data/big.bin={dripping[:-8]}/ok.bin"
        subprocess.run([malaunch_executable(), *args], env=clean_env(), cwd=tmp_path,
                       capture_output=True, timeout=60, check=False)  # fmt: skip
    assert _partials(data) == []
