"""A loopback static file server: ``python3 -m http.server PORT --bind 127.0.0.1``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .proc import HarnessError

HOST = "127.0.0.1"


@dataclass
class StaticServer:
    """A running ``http.server`` child process serving ``root``.

    Attributes:
        root: The directory served; files added later are served too.
        port: TCP port on 127.0.0.1.
        process: The server process (stopped by :meth:`stop`).
    """

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://{HOST}:{self.port}"

    def stop(self) -> None:
        """Terminate the server and wait for it (kill after 5 s)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(root: Path, log: Path) -> StaticServer:
    """Start serving ``root`` on a free loopback port; returns once it accepts connections.

    Raises:
        HarnessError: if the server exits or does not listen within 10 s.
    """
    port = free_port()
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", HOST, "--directory", str(root)],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    server = StaticServer(root, port, process)
    if not wait_for_port(HOST, port, 10.0, process):
        server.stop()
        raise HarnessError(f"http.server on {HOST}:{port} did not start; see {log}")
    return server


def free_port() -> int:
    """A TCP port the kernel reports free on 127.0.0.1 (racy, but retried by callers rarely)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    host: str, port: int, timeout: float, process: subprocess.Popen[bytes] | None = None
) -> bool:
    """Poll until ``host:port`` accepts a TCP connection; False on timeout or if ``process`` died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.02)
    return False
