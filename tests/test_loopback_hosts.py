"""Every loopback server sagemeter starts answers only requests naming a loopback host: a page
that rebinds its name to 127.0.0.1 (DNS rebinding) gets 421 from the embedded engine (through
its host guard), calibrate-server and `mcp --http`, whose own clients are served as before."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.engines.llamacpp import LocalEngine
from sagemeter.engines.ports import free_port
from sagemeter.hostguard import HostGuard
from sagemeter.loopback import MISDIRECTED, is_loopback_host

FOREIGN = ["evil.example", "evil.example:8080", "127.0.0.1.nip.io:80", "[::2]:80", "10.0.0.1", ""]
LOOPBACK = ["127.0.0.1", "127.0.0.1:8080", "localhost:1", "LOCALHOST.", "app.localhost:9",
            "127.9.9.9:5", "[::1]:8000", "[::1]"]  # fmt: skip


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_names_pass(host: str) -> None:
    assert is_loopback_host(host) and is_loopback_host(host.encode())


@pytest.mark.parametrize("host", FOREIGN)
def test_other_names_are_refused(host: str) -> None:
    assert not is_loopback_host(host)


def _status(url: str, host: str | None, path: str = "/health", method: str = "GET") -> int:
    """The status line's code for one raw request to `url` carrying `Host: host`."""
    address = url.removeprefix("http://").split("/", 1)[0]
    name, _, port = address.rpartition(":")
    head = [f"{method} {path} HTTP/1.1", "Connection: close", "Accept: */*"]
    if host is not None:
        head.append(f"Host: {host}")
    if method == "POST":
        head += ["Content-Type: application/json", "Content-Length: 2"]
    raw = ("\r\n".join(head) + "\r\n\r\n" + ("{}" if method == "POST" else "")).encode()
    with socket.create_connection((name, int(port)), timeout=30) as conn:
        conn.sendall(raw)
        answer = b""
        while b"\r\n" not in answer:
            piece = conn.recv(4096)
            if not piece:
                break
            answer += piece
    return int(answer.split(b" ", 2)[1])


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(ttft_s=0.001, itl_s=0.001)) as url:
        yield url


def _mcp_http(port: int, results: Path) -> Iterator[str]:
    env = {**os.environ, "SAGEMETER_HOME": str(results.parent / "home")}
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "mcp", "--http", str(port), "--results-dir",
         str(results)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()  # below the kernel's ephemeral range: no bind(0) takes it meanwhile
    yield from _mcp_http(port, tmp_path_factory.mktemp("mcp") / "results")


def test_calibrate_server_refuses_a_foreign_host_and_serves_its_own(truth_url: str) -> None:
    assert _status(truth_url, "evil.example:80") == MISDIRECTED
    assert _status(truth_url, "evil.example", "/v1/chat/completions", "POST") == MISDIRECTED
    port = truth_url.rsplit(":", 1)[1]
    assert _status(truth_url, f"127.0.0.1:{port}") == 200
    assert _status(truth_url, f"localhost:{port}", "/v1/models") == 200


def test_mcp_http_refuses_a_foreign_host(mcp_url: str) -> None:
    port = mcp_url.rsplit(":", 1)[1]
    assert _status(mcp_url, f"evil.example:{port}", "/mcp", "POST") == MISDIRECTED
    # Its own name gets past the host check (to the protocol's own answer about the request).
    assert _status(mcp_url, f"127.0.0.1:{port}", "/mcp", "POST") != MISDIRECTED


class _UnixEcho:
    """A Unix-socket server answering every connection 200 with the request's first line."""

    def __init__(self) -> None:
        self.folder = tempfile.TemporaryDirectory()
        self.path = str(Path(self.folder.name) / "up.sock")
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(65536)
                body = data.split(b"\r\n", 1)[0]
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)


def test_the_guard_passes_loopback_requests_whole_and_answers_others_421() -> None:
    upstream = _UnixEcho()
    guard = HostGuard(upstream.path)
    try:
        for host in FOREIGN:
            assert _status(guard.url, host) == MISDIRECTED, host
        assert _status(guard.url, None) == 200  # HTTP/1.0 style: no Host, no browser
        with socket.create_connection(("127.0.0.1", guard.port)) as conn:
            conn.sendall(b"GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            time.sleep(0.2)
            assert conn.recv(4096).endswith(b"GET /x?y=1 HTTP/1.1")
        assert guard.refused == len(FOREIGN)
    finally:
        guard.close()
        upstream.listener.close()


def test_the_embedded_engine_refuses_a_foreign_host(engine: LocalEngine) -> None:
    assert engine.base_url is not None
    root = engine.base_url.removesuffix("/v1")
    port = root.rsplit(":", 1)[1]
    assert _status(root, f"evil.example:{port}") == MISDIRECTED
    assert _status(root, "attacker.test", "/v1/chat/completions", "POST") == MISDIRECTED
    assert _status(root, f"127.0.0.1:{port}") == 200
    assert _status(root, f"localhost:{port}", "/v1/models") == 200
