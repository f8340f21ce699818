"""A stage-in from a server that does not say a file's size arrives whole, never empty.

fsspec lists an HTTP file without ``Content-Length`` (a generated file, a proxy that streams)
with no size; the stager took that for 0 bytes, wrote an empty file and said "1 file, 0 B":
the job then ran on no data with exit 0. Sizes are generated, around the 8 MiB read piece.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malaunch.testing import run_cli

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
def test_a_file_without_a_listed_size_arrives_whole(
    server: str, tmp_path: Path, size: int
) -> None:
    args = ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs")]
    args += ["--stage-in", f"data.bin={server}/{size}.bin", "--", "python", "-c", CHECK, str(size)]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert (tmp_path / "data.bin").stat().st_size == size
    # Nothing says it is unchanged: a second run fetches it again, whole.
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert (tmp_path / "data.bin").stat().st_size == size
