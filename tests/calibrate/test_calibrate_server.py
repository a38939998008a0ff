"""The known-truth server, over real sockets: what it sends, when (lower bounds only), and how.

Timing is checked only from below: the machine is shared, so a reply may come late, but it must
never come early, or every load generator checked against it would look better than it is.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sagemeter.calibrate import TruthTiming, parse_duration, running_truth_server
from sagemeter.calibrate import arrival as receive_stamps
from sagemeter.calibrate.wire import TOKEN_TEXT
from sagemeter.errors import UserError
from tests import cli_run

TIMING = TruthTiming(ttft_s=0.03, itl_s=0.002)
TOKENS = 20


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TIMING) as url:
        yield url


def _stream(client: httpx.Client, path: str, tokens: int) -> tuple[list[float], list[str], float]:
    """Arrival time of every `data:` event after the send, the events, and the total time."""
    body = {"model": "m", "max_tokens": tokens, "stream": True, "ignore_eos": True}
    body["stream_options"] = {"include_usage": True}
    arrivals: list[float] = []
    events: list[str] = []
    start = time.perf_counter()
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.perf_counter() - start)
                events.append(line[len("data: ") :])
    return arrivals, events, time.perf_counter() - start


def test_truth_timing_gives_the_shared_figures() -> None:
    timing = TruthTiming(0.05, 0.004)
    assert timing.request_seconds(256) == pytest.approx(1.074)
    assert timing.tpot_s == 0.004
    assert timing.tokens_per_second(1, 256) == pytest.approx(238.36, abs=0.01)
    assert round(timing.tokens_per_second(16, 256)) == 3814
    assert round(timing.tokens_per_second(64, 256)) == 15255
    assert round(timing.tokens_per_second(128, 256)) == 30510


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("50ms", 0.05), ("0.05s", 0.05), ("0.05", 0.05), ("4 ms", 0.004), ("250us", 0.00025)],
)
def test_parse_duration_accepts_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "-5ms", "5 min", "ms"])
def test_parse_duration_refuses_other_text(text: str) -> None:
    with pytest.raises(UserError, match="give a duration such as 50ms"):
        parse_duration(text, "--ttft")


def test_negative_timing_is_refused() -> None:
    with pytest.raises(UserError, match="itl"):
        TruthTiming(0.05, -0.001)


def test_streamed_chat_reply_has_every_chunk_usage_and_done_never_early(truth_url: str) -> None:
    with httpx.Client(base_url=truth_url) as client:
        arrivals, events, total = _stream(client, "/v1/chat/completions", TOKENS)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    # As vLLM does: an opening event names the role (no token), then one event per token.
    opening, *content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"]]
    assert opening["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len(content) == TOKENS
    assert all(c["choices"][0]["delta"] == {"content": TOKEN_TEXT} for c in content)
    assert all(c["choices"][0]["finish_reason"] is None for c in content)
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["usage"]["completion_tokens"] == TOKENS
    # chunk k (1-based) leaves at ttft + (k - 1) * itl; the end at ttft + N * itl
    assert arrivals[0] >= TIMING.ttft_s  # the opening leaves with the first token
    for k, arrival in enumerate(arrivals[1 : TOKENS + 1], start=1):
        assert arrival >= TIMING.ttft_s + (k - 1) * TIMING.itl_s
    assert arrivals[TOKENS + 1] >= TIMING.request_seconds(TOKENS)
    assert total >= TIMING.request_seconds(TOKENS)


def test_streamed_completion_reply_sends_text_chunks(truth_url: str) -> None:
    with httpx.Client(base_url=truth_url) as client:
        arrivals, events, _ = _stream(client, "/v1/completions", 5)
    chunks = [json.loads(event) for event in events[:-1]]
    assert [c["choices"][0]["text"] for c in chunks] == [TOKEN_TEXT] * 5 + [""]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"] == {"prompt_tokens": 0, "completion_tokens": 5, "total_tokens": 5}
    assert arrivals[0] >= TIMING.ttft_s


@pytest.mark.parametrize(
    ("path", "text_of"),
    [
        ("/v1/chat/completions", lambda body: body["choices"][0]["message"]["content"]),
        ("/v1/completions", lambda body: body["choices"][0]["text"]),
    ],
)
def test_whole_reply_comes_after_the_time_the_stream_would_take(
    truth_url: str, path: str, text_of: object
) -> None:
    with httpx.Client(base_url=truth_url) as client:
        start = time.perf_counter()
        response = client.post(path, json={"prompt": "ignored", "max_completion_tokens": 7})
        elapsed = time.perf_counter() - start
    assert response.status_code == 200
    body = response.json()
    assert callable(text_of)
    assert text_of(body) == TOKEN_TEXT * 7
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 7
    assert elapsed >= TIMING.request_seconds(7)


def test_models_and_health(truth_url: str) -> None:
    with httpx.Client(base_url=truth_url) as client:
        assert client.get("/health").json() == {"status": "ok"}
        models = client.get("/v1/models").json()
    assert [model["id"] for model in models["data"]] == ["truth"]


def test_refusals_are_openai_errors_and_keep_the_connection(truth_url: str) -> None:
    with httpx.Client(base_url=truth_url) as client:
        bad_json = client.post("/v1/chat/completions", content=b"{not json")
        not_object = client.post("/v1/chat/completions", json=[1, 2])
        bad_tokens = client.post("/v1/chat/completions", json={"max_tokens": "many"})
        zero_tokens = client.post("/v1/completions", json={"max_tokens": 0})
        unknown = client.get("/v2/anything")
        wrong_method = client.get("/v1/chat/completions")
        after = client.post("/v1/completions", json={"max_tokens": 1})
        stats = client.get("/stats").json()
    assert bad_json.status_code == 400
    assert bad_json.json()["error"]["message"] == "the request body is not valid JSON"
    assert not_object.status_code == 400
    assert bad_tokens.status_code == 400
    assert "whole number" in bad_tokens.json()["error"]["message"]
    assert zero_tokens.status_code == 400
    assert unknown.status_code == 404
    assert "/v2/anything" in unknown.json()["error"]["message"]
    assert wrong_method.status_code == 405
    assert after.status_code == 200
    assert stats["connections"] >= 1


def test_one_kept_alive_connection_serves_every_request() -> None:
    with running_truth_server(TIMING) as url, httpx.Client(base_url=url) as client:
        for _ in range(3):
            _, events, _ = _stream(client, "/v1/chat/completions", 4)
            assert events[-1] == "[DONE]"
            assert client.post("/v1/completions", json={"max_tokens": 2}).status_code == 200
        stats = client.get("/stats").json()
    assert stats["connections"] == 1
    assert stats["requests"] == 6


def _read_chunked_response(sock: socket.socket, buffer: bytearray) -> bytes:
    """Read one chunked response off `sock`; return its body and leave what follows in buffer."""
    while b"\r\n\r\n" not in buffer:
        buffer += sock.recv(65536)
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in head
    buffer[:] = rest
    body = b""
    while True:
        while b"\r\n" not in buffer:
            buffer += sock.recv(65536)
        size_line, _, rest = bytes(buffer).partition(b"\r\n")
        size = int(size_line, 16)
        while len(rest) < size + 2:
            rest += sock.recv(65536)
        body += rest[:size]
        buffer[:] = rest[size + 2 :]
        if size == 0:
            return body


def test_pipelined_requests_on_one_socket_are_answered_in_order(truth_url: str) -> None:
    port = int(truth_url.rsplit(":", 1)[1])

    def request(tokens: int) -> bytes:
        body = json.dumps({"max_tokens": tokens, "stream": True}).encode()
        head = f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {len(body)}\r\n"
        return head.encode() + b"\r\n" + body

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request(3) + request(5))  # both before the first answer
        buffer = bytearray()
        first = _read_chunked_response(sock, buffer)
        second = _read_chunked_response(sock, buffer)
    assert first.count(b'"content":"tok "') == 3
    assert second.count(b'"content":"tok "') == 5
    assert b'"completion_tokens":5' in second


def test_a_client_leaving_mid_stream_does_not_disturb_the_server() -> None:
    with running_truth_server(TIMING) as url:
        port = int(url.rsplit(":", 1)[1])
        body = json.dumps({"max_tokens": 500, "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        with httpx.Client(base_url=url) as client:
            _, events, _ = _stream(client, "/v1/chat/completions", 3)
            assert events[-1] == "[DONE]"
            deadline = time.monotonic() + 10
            while (stats := client.get("/stats").json())["pending_replies"] and (
                time.monotonic() < deadline
            ):
                time.sleep(0.05)
    assert stats["pending_replies"] == 0  # the abandoned stream was dropped
    assert stats["requests"] == 1  # only the finished one counts


def test_stats_count_requests_tokens_and_own_cpu() -> None:
    async def many(url: str, streams: int) -> list[int]:
        limits = httpx.Limits(max_connections=streams)
        async with httpx.AsyncClient(base_url=url, limits=limits) as client:

            async def one() -> int:
                body = {"max_tokens": TOKENS, "stream": True}
                count = 0
                async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        count += '"content":"tok "' in line
                return count

            return await asyncio.gather(*(one() for _ in range(streams)))

    with running_truth_server(TIMING) as url:
        before = httpx.get(f"{url}/stats").json()
        counts = asyncio.run(many(url, 24))
        after = httpx.get(f"{url}/stats").json()
    assert counts == [TOKENS] * 24
    assert before["requests"] == 0
    assert before["tokens"] == 0
    assert after["requests"] == 24
    assert after["tokens"] == 24 * TOKENS
    assert after["cpu_seconds"] > before["cpu_seconds"] > 0
    assert after["uptime_s"] > before["uptime_s"] > 0
    assert after["exact_writes"] == 2 * 24  # every first token and every end
    assert after["first_tokens"] == 24
    assert 0 <= after["first_token_lateness_sum_s"] <= after["exact_lateness_sum_s"]
    assert 2 * 24 <= after["writes"] <= 24 * (TOKENS + 1)  # chunks found late share a write
    assert after["lateness_sum_s"] >= 0
    assert (after["ttft_s"], after["itl_s"]) == (TIMING.ttft_s, TIMING.itl_s)
    assert after["arrival_clock"] == (
        "kernel" if receive_stamps.kernel_stamps_arrival() else "read"
    )


@pytest.mark.parametrize("stamped", [True, False])
def test_a_request_is_timed_from_when_its_bytes_arrived_not_when_they_were_read(
    stamped: bool,
) -> None:
    """Bytes left unread for 80 ms: with the kernel's stamp they still arrived 80 ms ago.

    Where the kernel's stamps are not read (not Linux x86-64 or ARM64, or a kernel that stamps
    at read time), asking for them says so and the read time stands in.
    """
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        socket.create_connection(listener.getsockname()) as client,
    ):
        server_side, _ = listener.accept()
        with server_side:
            if stamped:
                stamped = receive_stamps.enable_stamps(server_side)
                assert stamped is receive_stamps.kernel_stamps_arrival()
            client.sendall(b"POST / HTTP/1.1\r\n\r\n")
            time.sleep(0.08)
            data, arrived = receive_stamps.receive(server_side, 4096, stamped)
            waited = time.monotonic() - arrived
    assert data == b"POST / HTTP/1.1\r\n\r\n"
    if stamped:
        assert 0.075 <= waited < 1.0
    else:
        assert 0 <= waited < 0.075


def _wait_for_port(port_file: Path, process: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text())
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError("calibrate-server did not write its port")


def test_cli_serves_until_ctrl_c(tmp_path: Path, sagemeter_env: dict[str, str]) -> None:
    port_file = tmp_path / "port"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagemeter",
            "calibrate-server",
            "--ttft",
            "20ms",
            "--itl",
            "0.001",
            "--port-file",
            str(port_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=sagemeter_env,
    )
    try:
        port = _wait_for_port(port_file, process)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            stats = client.get("/stats").json()
            start = time.perf_counter()
            reply = client.post("/v1/completions", json={"max_tokens": 10})
            elapsed = time.perf_counter() - start
        assert (stats["ttft_s"], stats["itl_s"]) == (0.02, 0.001)
        assert reply.json()["usage"]["completion_tokens"] == 10
        assert elapsed >= 0.02 + 10 * 0.001
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert f"http://127.0.0.1:{port}" in out
    assert "stopped" in out


def test_cli_bad_duration_is_one_line_and_exit_2(sagemeter_env: dict[str, str]) -> None:
    result = cli_run.invoke(["calibrate-server", "--itl", "soon"], sagemeter_env)
    assert result.returncode == 2
    assert "--itl 'soon': give a duration such as 50ms" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_port_in_use_is_one_line_and_exit_2(sagemeter_env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli_run.invoke(
            ["calibrate-server", "--port", str(port)], {**sagemeter_env, "COLUMNS": "200"}
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert os.linesep not in result.stderr.strip()


def test_the_batching_grid_divides_the_token_interval() -> None:
    """Tokens wait for grid points; a period that divides the interval keeps every gap equal."""
    from sagemeter.calibrate.scheduler import grid_period

    assert grid_period(0.001, 0.004) == pytest.approx(0.001)
    assert grid_period(0.001, 0.0045) == pytest.approx(0.0009)  # 5 steps per token
    assert grid_period(0.001, 0.0005) == pytest.approx(0.0005)  # never longer than a token
    assert grid_period(0.0, 0.004) == 0.0  # no grid: every deadline woken for exactly
    for gap, interval in ((0.001, 0.004), (0.001, 0.0045), (0.0007, 0.02)):
        period = grid_period(gap, interval)
        assert period <= gap + 1e-12
        assert interval / period == pytest.approx(round(interval / period))
