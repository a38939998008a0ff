"""Upstream error bodies shown in one short line: the status and the first meaningful words.

A proxy's 500 page repeats itself for two thousand characters; a person needs its title. The
wire test answers such a page from a real loopback server and reads the record's error.
"""

from __future__ import annotations

from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.openai import OpenAIChat
from sagemeter.transport.retry import NO_RETRIES
from sagemeter.transport.upstream import MAX_CHARS, one_line, status_line
from tests.wire import WireServer

CHAT = "/v1/chat/completions"
PAGE = (
    "<!DOCTYPE html><html><head><title>500 Internal Server Error</title>"
    "<style>body { font-family: sans-serif; }</style></head><body>"
    + "<h2>Oops</h2><p>The upstream server failed. Please try again later.</p>" * 28
    + "</body></html>"
)
ENVOY = "<p>upstream connect error or disconnect/reset before headers. reset reason: overflow</p>"


def _html_500(body: str) -> bytes:
    data = body.encode()
    return (
        b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/html\r\n"
        + f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
        + data
    )


async def test_an_html_500_page_becomes_its_status_and_title() -> None:
    async def fail(writer, body):  # type: ignore[no-untyped-def]
        writer.write(_html_500(PAGE))

    assert len(PAGE) > 1900
    with WireServer({CHAT: fail}) as server:
        async with OpenAIChat(server.url, model="m", timeout_s=5.0, retry=NO_RETRIES) as client:
            record = await client.chat(ChatRequest(prompt="hi", max_tokens=3, stream=True))
    assert not record.ok
    assert record.error == "HTTP 500: 500 Internal Server Error"


def test_text_without_a_title_loses_its_tags_and_repeats() -> None:
    assert one_line(ENVOY * 20) == (
        "upstream connect error or disconnect/reset before headers. reset reason: overflow"
    )
    assert status_line(503, "") == "HTTP 503"
    assert status_line(502, "<html><body>\n\n  Bad &amp; gateway </body></html>") == (
        "HTTP 502: Bad & gateway"
    )


def test_json_errors_give_their_message_and_long_text_is_cut() -> None:
    assert one_line(b'{"error": {"message": "model not found", "code": 404}}') == "model not found"
    assert one_line('{"detail": "Not Found"}') == "Not Found"
    assert one_line('{"error": "overloaded"}') == "overloaded"
    long = one_line("word " * 500 + "x" * 400)
    assert len(long) == MAX_CHARS and long.endswith("…") and "\n" not in long
