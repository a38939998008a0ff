"""HTTPS through the transport: a hosted endpoint is reached over TLS, with the system's trust.

A TLS front on loopback (certificates from a throwaway CA) forwards to the known-truth server,
as a hosted endpoint's load balancer would. The client trusts what `ssl.create_default_context`
trusts, so the CA is handed over the standard way (`SSL_CERT_FILE`), and the batch's worker
processes inherit it.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trustme

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.transport.chat import ChatRequest, Unreachable
from sagemeter.transport.openai import OpenAIChat

TIMING = TruthTiming(ttft_s=0.03, itl_s=0.002)
TOKENS = 12


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


class TlsFront:
    """Terminates TLS on 127.0.0.1 and forwards each connection to `upstream` in plain HTTP."""

    def __init__(self, upstream: str, context: ssl.SSLContext) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.context = context
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TlsFront:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._forward, "127.0.0.1", 0, ssl=self.context)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        server.close()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def https_url(authority: trustme.CA) -> Iterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    with running_truth_server(TIMING) as url, TlsFront(url, context) as front:
        yield f"https://localhost:{front.port}"


def test_a_streamed_reply_and_a_batch_over_https_keep_their_timing(
    https_url: str, authority: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))

    async def run() -> tuple[object, object]:
        async with OpenAIChat(https_url) as client:
            await client.preflight()
            one = await client.chat(ChatRequest(prompt="x", max_tokens=TOKENS, ignore_eos=True))
            batch = await client.batch(
                [ChatRequest(prompt="x", max_tokens=TOKENS, ignore_eos=True) for _ in range(4)]
            )
            return one, batch

    one, batch = asyncio.run(run())
    records = [one, *batch.records]  # type: ignore[attr-defined]
    assert all(record.ok for record in records), [record.error for record in records]
    assert [record.tokens for record in records] == [TOKENS] * 5
    for record in records:
        assert record.first_token_s >= TIMING.ttft_s  # never early, through TLS too
        assert record.total_s >= TIMING.request_seconds(TOKENS)
        assert len(record.arrivals_us) == TOKENS


def test_an_untrusted_certificate_is_a_failure_that_names_it(
    https_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stranger = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    monkeypatch.setenv("SSL_CERT_FILE", str(stranger))

    async def run() -> tuple[str, str | None]:
        async with OpenAIChat(https_url) as client:
            try:
                await client.preflight()
            except Unreachable as exc:
                refused = str(exc)
            else:
                raise AssertionError("an untrusted certificate was accepted")
            batch = await client.batch([ChatRequest(prompt="x", max_tokens=TOKENS)] * 2)
            return refused, batch.failure

    refused, batch_failure = asyncio.run(run())
    # Not "Operation not permitted": OpenSSL's error code is no errno.
    assert "TLS certificate not trusted: unable to get local issuer certificate" in refused
    assert batch_failure is not None
    assert "TLS certificate not trusted: unable to get local issuer certificate" in batch_failure
