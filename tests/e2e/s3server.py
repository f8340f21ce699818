"""A real S3 API server on loopback for the staging tests: moto's server (``moto[server]``),
never a mocked client.

The server runs in a thread of the test process (``ThreadedMotoServer``), so its buckets
outlive a :meth:`S3Server.stop`: a test can stop it mid-transfer, start it again on the same
port and look at what is left. :meth:`S3Server.stop` also closes the listening socket (moto's
own ``stop`` leaves it open, which would make a client hang instead of failing). The port is
reserved (``tests/ports.py``) from the server's creation until :meth:`S3Server.close`, so a
test running beside it is never given it, also while the server is stopped.
"""

from __future__ import annotations

import socket
import urllib.request
import warnings
from typing import Any, Dict, Iterator, Optional

from moto.server import ThreadedMotoServer

from ports import reserve

KEY = "AKIAMALAUNCHTEST"
SECRET = "malaunch-test-secret"


class S3Server:
    """moto's S3 on ``127.0.0.1:<port>``, a port of its own; ``client()`` is a boto3 client
    pointed at it. Not listening until :meth:`start`; :meth:`close` gives the port up."""

    def __init__(self) -> None:
        self._reserved = reserve()
        self.port = int(self._reserved.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._moto: Optional[ThreadedMotoServer] = None

    def start(self) -> None:
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._moto.start()

    def stop(self) -> None:
        if self._moto is None:
            return
        self._moto.stop()
        server = self._moto._server  # moto's stop() leaves the socket listening
        if server is not None:
            server.server_close()
        self._moto = None

    def close(self) -> None:
        """Stop, and give the port up."""
        self.stop()
        self._reserved.close()

    def reset(self) -> None:
        """Forget every bucket (moto keeps them per process, across server instances)."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

    def listening(self) -> bool:
        with socket.socket() as probe:
            probe.settimeout(1.0)
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def client(self) -> Any:
        import boto3  # noqa: PLC0415 (boto3 is a test dependency only)

        with warnings.catch_warnings():
            # boto3 on Python 3.9 warns that it will drop 3.9; the tests turn warnings into errors
            warnings.filterwarnings("ignore", message="Boto3 will no longer support Python")
            return boto3.client(
                "s3",
                endpoint_url=self.endpoint,
                aws_access_key_id=KEY,
                aws_secret_access_key=SECRET,
                region_name="us-east-1",
            )

    def env(self) -> Dict[str, str]:
        """The standard AWS variables for this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
        }

    def modelarts_env(self) -> Dict[str, str]:
        """The ModelArts variables for this server (endpoint without scheme, as injected)."""
        return {
            "S3_ENDPOINT": f"127.0.0.1:{self.port}",
            "S3_USE_HTTPS": "0",
            "S3_VERIFY_SSL": "0",
            "ACCESS_KEY_ID": KEY,
            "SECRET_ACCESS_KEY": SECRET,
        }


def running_server() -> Iterator[S3Server]:
    """Start a server, yield it, stop it and check the port is closed (a fixture's body)."""
    server = S3Server()
    server.start()
    server.reset()
    try:
        yield server
    finally:
        server.stop()
        assert not server.listening()
        server.close()
